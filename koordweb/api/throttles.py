"""Rate limits per API token (per session user, per client address when anonymous).

Counters live in the shared cache (settings.CACHES["default"]) so every web process counts
together; the cache is looked up at call time so a test that swaps the cache backend is honoured.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import caches
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle


class SharedCacheThrottle(SimpleRateThrottle):
    """Reads the cache and the rates when used, not when imported (settings may change)."""

    def __init__(self) -> None:
        self.cache = caches["default"]
        super().__init__()

    def get_rate(self) -> str | None:
        rates: dict[str, Any] = dict(api_settings.DEFAULT_THROTTLE_RATES)
        rate = rates.get(str(self.scope))
        return rate if isinstance(rate, str) else None


class TokenRateThrottle(SharedCacheThrottle):
    """`user` rate for authenticated callers, counted per token when a token authenticated."""

    scope = "user"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        user = request.user
        if not (user and user.is_authenticated):
            return None
        token_key = getattr(request.auth, "token_key", None)
        ident = f"token:{token_key}" if token_key else f"user:{user.pk}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AnonymousRateThrottle(SharedCacheThrottle):
    """`anon` rate for callers without credentials, per client address."""

    scope = "anon"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if request.user and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
