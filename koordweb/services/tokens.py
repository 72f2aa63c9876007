"""API tokens (knox: stored hashed, expiring): create, list and revoke a user's own tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from knox.models import AuthToken
from knox.settings import knox_settings


@transaction.atomic
def token_create(*, user: Any, expiry: Any = None) -> tuple[AuthToken, str]:
    """A new token for `user`; the clear text is returned once and never stored.

    `expiry` is a timedelta; None means the configured TTL (REST_KNOX TOKEN_TTL).
    """
    ttl = expiry if expiry is not None else knox_settings.TOKEN_TTL
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
