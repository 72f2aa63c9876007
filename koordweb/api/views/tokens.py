"""tokens/: a user lists, creates (from a browser session) and revokes their own API tokens."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import Http404
from django.utils.cache import add_never_cache_headers
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from koordweb.api.base import ApiView
from koordweb.api.serializers.tokens import (
    NewTokenSerializer,
    TokenCreateSerializer,
    TokenSerializer,
)
from koordweb.services.tokens import token_create, token_list, token_revoke


class TokenListView(ApiView):
    pagination_class = None  # a user has a handful of tokens

    @extend_schema(responses={200: TokenSerializer(many=True)}, operation_id="tokens_list")
    def get(self, request: Request) -> Response:
        tokens = token_list(user=request.user)
        return Response(TokenSerializer(tokens, many=True).data)

    @extend_schema(
        request=TokenCreateSerializer,
        responses={201: NewTokenSerializer},
        description="Only from a logged-in browser session (with its CSRF token): a token "
        "cannot mint further tokens.",
    )
    def post(self, request: Request) -> Response:
        if not isinstance(request.successful_authenticator, SessionAuthentication):
            raise PermissionDenied("Create tokens from a logged-in session, not with a token.")
        body = TokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        days = body.validated_data.get("expiry_days")
        expiry: Any = timedelta(days=days) if days else None
        instance, clear_text = token_create(user=request.user, expiry=expiry)
        data = {
            "token_key": instance.token_key,
            "created": instance.created,
            "expiry": instance.expiry,
            "token": clear_text,
        }
        response = Response(NewTokenSerializer(data).data, status=status.HTTP_201_CREATED)
        add_never_cache_headers(response)  # the secret: no cache or history may keep it
        return response


class TokenDetailView(ApiView):
    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, token_key: str) -> Response:
        if not token_revoke(user=request.user, token_key=token_key):
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)
