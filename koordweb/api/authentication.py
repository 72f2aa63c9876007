"""API tokens: knox's token authentication, with a token that is not even ASCII refused as any
wrong token is (401). Knox decodes the header's token as UTF-8 unguarded, so a byte such as \\xe9
answered 500."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import exceptions


class TokenAuthentication(KnoxTokenAuthentication):
    def authenticate_credentials(self, token: bytes) -> Any:
        try:
            token.decode("ascii")  # knox's tokens are hex digits
        except UnicodeDecodeError as error:
            raise exceptions.AuthenticationFailed(_("Invalid token.")) from error
        return super().authenticate_credentials(token)


class TokenScheme(KnoxTokenScheme):
    """The OpenAPI description's token scheme, as for knox's own class (`knoxApiToken`)."""

    target_class = "koordweb.api.authentication.TokenAuthentication"
