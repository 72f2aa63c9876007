"""Users and API clients: a user row, and an API client that speaks as a user with a token."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests-only")


def token_client(user: Any) -> APIClient:
    """An API client that authenticates as `user` with a fresh token."""
    from koordweb.services.tokens import token_create

    client = APIClient()
    _, clear_text = token_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {clear_text}")
    return client
