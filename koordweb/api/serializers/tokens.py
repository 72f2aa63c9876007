"""API tokens as answered: the key (a prefix, not the secret), dates, and the secret once."""

from __future__ import annotations

from rest_framework import serializers

from koordweb.api.serializers.strict import StrictSerializer
from koordweb.limits import TOKEN_DAYS


class TokenSerializer(serializers.Serializer):  # type: ignore[type-arg]
    token_key = serializers.CharField(help_text="The first characters; identifies the token.")
    created = serializers.DateTimeField()
    expiry = serializers.DateTimeField(allow_null=True)


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The secret: shown once, stored only hashed.")


class TokenCreateSerializer(StrictSerializer):
    expiry_days = serializers.IntegerField(
        min_value=TOKEN_DAYS.minimum,
        max_value=TOKEN_DAYS.maximum,
        required=False,
        help_text="Days; the configured TTL if left out.",
    )
