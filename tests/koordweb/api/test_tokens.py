"""API tokens: created from a session (with CSRF) or by `create_token`, listed, revoked."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.builders import token_client

TOKENS = "/api/v1/tokens/"
CSRF = "abcdefghijklmnopqrstuvwxyzABCDEF"  # 32 characters: an unmasked CSRF secret


@pytest.fixture
def session(world):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.alice)
    client.cookies["csrftoken"] = CSRF
    return client


def test_session_creates_a_token_that_then_authenticates(session, world):
    response = session.post(TOKENS, {"expiry_days": 7}, format="json", HTTP_X_CSRFTOKEN=CSRF)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["token"].startswith(body["token_key"])
    instance = AuthToken.objects.get(token_key=body["token_key"])
    assert instance.digest != body["token"]  # stored hashed
    assert timedelta(days=6) < instance.expiry - timezone.now() <= timedelta(days=7)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {body['token']}")
    assert api.get("/api/v1/jobs/").status_code == 200


def test_session_without_csrf_is_refused(session):
    response = session.post(TOKENS, {}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert AuthToken.objects.count() == 0


def test_a_token_cannot_mint_tokens(alice_api):
    response = alice_api.post(TOKENS, {}, format="json")
    assert response.status_code == 403
    assert AuthToken.objects.count() == 1


def test_list_and_revoke(alice_api, world):
    tokens = alice_api.get(TOKENS).json()
    assert len(tokens) == 1
    assert alice_api.delete(f"{TOKENS}{tokens[0]['token_key']}/").status_code == 204
    assert alice_api.get(TOKENS).status_code == 401  # it revoked itself


def test_expired_token_is_refused(world):
    _, clear_text = AuthToken.objects.create(user=world.bob, expiry=timedelta(seconds=-1))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {clear_text}")
    assert api.get("/api/v1/jobs/").status_code == 401


def test_create_token_command_prints_the_token_last(world):
    out = StringIO()
    call_command("create_token", "alice", stdout=out)
    token = out.getvalue().strip().splitlines()[-1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/v1/jobs/").status_code == 200


def test_create_token_unknown_user_exits_2(world):
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("create_token", "nobody", stderr=err)
    assert exited.value.code == 2
    assert err.getvalue().strip().count("\n") == 0 and "nobody" in err.getvalue()


def test_throttled_per_user_whichever_token(alice_api, world, settings):
    """Issue #36 item 4: a second token of the same user once had a budget of its own."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"user": "3/min", "team": "100/min", "anon": "3/min"},
    }
    codes = [alice_api.get("/api/v1/nodes/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    other = APIClient()
    from koordweb.services.tokens import token_create

    other.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=world.alice)[1]}")
    refused = other.get("/api/v1/nodes/")
    assert refused.status_code == 429  # the user's budget, whichever token spends it
    assert "per user" in refused.json()["detail"]
    assert token_client(world.bob).get("/api/v1/nodes/").status_code == 200  # another user's
