"""Login rate limiting: failed sign-ins counted per account and, separately, per client address.

The two budgets lock different things. An account's budget (`KOORDWEB_LOGIN_FAILURE_LIMIT`,
5) locks that account from every address: a password guesser gets five tries per window. An
address's budget (`KOORDWEB_LOGIN_ADDRESS_FAILURE_LIMIT`, 50) locks the address for every
account: one machine spraying guesses over many names. Five wrong passwords for one user
therefore lock that user only, not everyone behind the same proxy. This follows django-axes'
"username or ip_address" lockout with our own counters in the shared cache.

The client address is REMOTE_ADDR, unless REMOTE_ADDR is one of `KOORDWEB_TRUSTED_PROXIES`
(addresses or networks): then it is the right-most X-Forwarded-For entry that is not a trusted
proxy, which is the address the outermost trusted proxy saw (entries further left are whatever
the client wrote).

Two pieces:

- `RateLimitedModelBackend` wraps Django's ModelBackend. Every password check anywhere (the UI
  login, the Django admin login, `Client.login` in tests) goes through it, so it is the one place
  that counts failures and refuses checks while a name or an address is locked out. Refusing by
  raising PermissionDenied makes `authenticate()` stop and report a failed login, without ever
  comparing the password (a locked-out attacker learns nothing, even with the right password).
- `RateLimitedLoginView` is the UI's LoginView that answers a locked-out attempt with a 429 page
  and a Retry-After header instead of the usual "name and password did not match" form.

Counters live in the `default` cache (Redis in production), so every gunicorn worker sees the same
counts. A window opens at the first failure and closes `window` seconds later (fixed window): the
limit is at most `limit` failures per window per key, whatever the number of processes.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html

DEFAULT_LOGIN_FAILURE_LIMIT = 5
DEFAULT_LOGIN_ADDRESS_FAILURE_LIMIT = 50
DEFAULT_LOGIN_FAILURE_WINDOW_SECONDS = 300
_CACHE_PREFIX = "koordweb:login-failures"


def _networks(entries: object) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    if isinstance(entries, str):
        entries = [part for part in entries.replace(",", " ").split() if part]
    if not isinstance(entries, list | tuple):
        return []
    return [ipaddress.ip_network(str(entry), strict=False) for entry in entries]


def _trusted(address: str, proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    try:
        parsed = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(parsed in network for network in proxies)


def client_ip(request: HttpRequest | None) -> str:
    """The client's address: REMOTE_ADDR, or, when that is a trusted proxy, the right-most
    X-Forwarded-For entry that is not one (KOORDWEB_TRUSTED_PROXIES; empty by default, so
    X-Forwarded-For, which any client can write, is ignored)."""
    if request is None:
        return ""
    peer = str(request.META.get("REMOTE_ADDR") or "")
    proxies = _networks(getattr(settings, "KOORDWEB_TRUSTED_PROXIES", []))
    if not proxies or not _trusted(peer, proxies):
        return peer
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR") or "")
    for entry in reversed([part.strip() for part in forwarded.split(",") if part.strip()]):
        if not _trusted(entry, proxies):
            return entry
    return peer


def _digest(kind: str, value: str) -> str:
    # Hashed so that any user name (unicode, spaces, 10 kB long) makes a valid, short cache key.
    return f"{_CACHE_PREFIX}:{kind}:" + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True)
class LoginRateLimiter:
    """At most `limit` failed logins per `window` seconds per account, and `address_limit` per
    client address; each budget, once spent, locks only what it counts."""

    limit: int = DEFAULT_LOGIN_FAILURE_LIMIT
    window: int = DEFAULT_LOGIN_FAILURE_WINDOW_SECONDS
    address_limit: int = DEFAULT_LOGIN_ADDRESS_FAILURE_LIMIT

    @classmethod
    def from_settings(cls) -> LoginRateLimiter:
        return cls(
            limit=int(getattr(settings, "KOORDWEB_LOGIN_FAILURE_LIMIT", cls.limit)),
            window=int(getattr(settings, "KOORDWEB_LOGIN_FAILURE_WINDOW", cls.window)),
            address_limit=int(
                getattr(settings, "KOORDWEB_LOGIN_ADDRESS_FAILURE_LIMIT", cls.address_limit)
            ),
        )

    def _budgets(self, username: str | None, ip: str | None) -> list[tuple[str, int]]:
        """(cache key, limit) for the account and the address."""
        budgets = []
        if username:
            # Names are matched case-insensitively so "Alice" and "alice" share one budget.
            budgets.append((_digest("user", username.strip().casefold()), self.limit))
        if ip:
            budgets.append((_digest("ip", ip), self.address_limit))
        return budgets

    def _keys(self, username: str | None, ip: str | None) -> list[str]:
        return [key for key, _ in self._budgets(username, ip)]

    def retry_after(self, username: str | None, ip: str | None) -> int:
        """Seconds until this name and address may try again; 0 when they may try now."""
        now = time.time()
        wait = 0.0
        for key, limit in self._budgets(username, ip):
            count = cache.get(key + ":count") or 0
            if count < limit:
                continue
            opened = cache.get(key + ":opened")
            closes = (opened if opened is not None else now) + self.window
            wait = max(wait, closes - now)
        return math.ceil(wait) if wait > 0 else 0

    def record_failure(self, username: str | None, ip: str | None) -> None:
        now = time.time()
        for key in self._keys(username, ip):
            # add() only writes when the window is not open yet, so the window keeps its start.
            cache.add(key + ":opened", now, timeout=self.window)
            if cache.add(key + ":count", 1, timeout=self.window):
                continue
            try:
                cache.incr(key + ":count")
            except ValueError:
                # The counter expired between add() and incr(): this failure opens a new window.
                cache.set(key + ":count", 1, timeout=self.window)

    def record_success(self, username: str | None) -> None:
        """A correct password clears the name's counter. The address keeps its count: otherwise
        an attacker with one valid account could log in now and then to keep guessing others."""
        for key in self._keys(username, None):
            cache.delete_many([key + ":count", key + ":opened"])

    def clear(self, username: str | None, ip: str | None) -> None:
        """Forget both counters (an admin unlocking a user, or a test cleaning up)."""
        for key in self._keys(username, ip):
            cache.delete_many([key + ":count", key + ":opened"])


class RateLimitedModelBackend(ModelBackend):
    """ModelBackend that counts failures and refuses to check passwords while locked out.

    Switch it on with AUTHENTICATION_BACKENDS = ["koordweb.security.RateLimitedModelBackend"].
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        limiter = LoginRateLimiter.from_settings()
        ip = client_ip(request)
        if limiter.retry_after(username, ip):
            # authenticate() treats PermissionDenied as "stop here": the password is never
            # compared and user_login_failed is still sent for the audit log.
            raise PermissionDenied("too many failed logins")
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if password is None:
            return user  # not a password check (another backend's credentials)
        if user is None:
            limiter.record_failure(username, ip)
        else:
            limiter.record_success(username)
        return user


def too_many_attempts(request: HttpRequest, retry_after: int) -> HttpResponse:
    """The 429 page: says how long to wait; a plain page so it needs no template."""
    minutes = max(1, math.ceil(retry_after / 60))
    body = format_html(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>Too many login attempts</title></head><body><main>"
        "<h1>Too many failed login attempts</h1>"
        "<p>Logging in is paused for this account or address. "
        "Try again in about {} minute{}.</p>"
        '<p><a href="{}">Back to the login page</a></p></main></body></html>',
        minutes,
        "" if minutes == 1 else "s",
        request.path,
    )
    response = HttpResponse(body, status=429)
    response["Retry-After"] = str(retry_after)
    return response


class RateLimitedLoginView(LoginView):
    """The UI login: a locked-out name or address gets 429 with Retry-After, not the form."""

    template_name = "login.html"

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.POST.get("username", "")
        limiter = LoginRateLimiter.from_settings()
        wait = limiter.retry_after(username, client_ip(request))
        if wait:
            return too_many_attempts(request, wait)
        # Counting happens in RateLimitedModelBackend, which every password check goes through.
        return super().post(request, *args, **kwargs)
