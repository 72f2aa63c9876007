"""API tokens (knox: stored hashed, expiring): create, list and revoke a user's own tokens.

Every door that mints a token (the API, the tokens page, `manage.py create_token`) comes here,
so the limits hold at all of them: a lifetime of at most `limits.TOKEN_DAYS` days, and at most
`KOORDWEB_MAX_TOKENS_PER_USER` live (unexpired) tokens per user.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from knox.models import AuthToken
from knox.settings import knox_settings

from koordweb.limits import TOKEN_DAYS

DEFAULT_MAX_TOKENS_PER_USER = 10


def max_tokens_per_user() -> int:
    return int(getattr(settings, "KOORDWEB_MAX_TOKENS_PER_USER", DEFAULT_MAX_TOKENS_PER_USER))


def token_lifetime(expiry: timedelta | None) -> timedelta:
    """The lifetime a new token gets: `expiry` when given (at most TOKEN_DAYS), else the
    configured TTL, itself held to the same maximum (a TTL of None, never, included)."""
    longest = timedelta(days=TOKEN_DAYS.maximum)
    if expiry is not None:
        if not timedelta(days=TOKEN_DAYS.minimum) <= expiry <= longest:
            raise ValidationError(
                {TOKEN_DAYS.field: [f"must be {TOKEN_DAYS.minimum} to {TOKEN_DAYS.maximum} days"]}
            )
        return expiry
    ttl = knox_settings.TOKEN_TTL
    return longest if ttl is None or ttl > longest else ttl


def live_tokens(*, user: Any, now: datetime) -> QuerySet[AuthToken]:
    return AuthToken.objects.filter(user=user).filter(Q(expiry__isnull=True) | Q(expiry__gt=now))


@transaction.atomic
def token_create(*, user: Any, expiry: timedelta | None = None) -> tuple[AuthToken, str]:
    """A new token for `user`; the clear text is returned once and never stored.

    `expiry` is a timedelta; None means the configured TTL (REST_KNOX TOKEN_TTL). A user who
    already holds the maximum of live tokens is refused (revoke one first).
    """
    ttl = token_lifetime(expiry)
    now = timezone.now()
    # The user's row locked: two creations at once cannot both pass the count.
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    most = max_tokens_per_user()
    held = live_tokens(user=user, now=now).count()
    if held >= most:
        raise ValidationError(
            {
                "tokens": [
                    f"limit reached: at most {most} live tokens per user, you hold {held}; "
                    "0 left (revoke one first)"
                ]
            }
        )
    instance, clear_text = AuthToken.objects.create(user=user, expiry=ttl)
    return instance, clear_text


def token_list(*, user: Any) -> QuerySet[AuthToken]:
    return AuthToken.objects.filter(user=user).order_by("-created")


def token_expired(token: AuthToken, now: datetime) -> bool:
    return token.expiry is not None and token.expiry <= now


@transaction.atomic
def token_revoke(*, user: Any, token_key: str) -> bool:
    """Delete the caller's token whose key (its first characters) is `token_key`."""
    deleted, _ = AuthToken.objects.filter(user=user, token_key=token_key).delete()
    return deleted > 0
