"""Production settings: `check --deploy` is clean, and responses carry the security headers.

The settings are read from a fresh interpreter with DEBUG off, a 50+ character SECRET_KEY and
ALLOWED_HOSTS set, exactly as a deployment starts, so these tests check
koordweb/settings/production.py itself rather than values restated here.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
HOST = "koordweb.example.com"
PRODUCTION_KEYS = [
    "DEBUG",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SESSION_COOKIE_HTTPONLY",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_CONTENT_TYPE_NOSNIFF",
    "SECURE_REFERRER_POLICY",
    "SECURE_PROXY_SSL_HEADER",
    "X_FRAME_OPTIONS",
    "CONTENT_SECURITY_POLICY",
]


def production_env(**overrides: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTEST") and key != "DJANGO_SETTINGS_MODULE"
    }
    env.update(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(60),
        ALLOWED_HOSTS=HOST,
        DJANGO_SETTINGS_MODULE="koordweb.settings.production",
    )
    env.pop("KOORDWEB_HTTPS", None)  # the production default, not a developer's override
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the browser tests' switch, never production's
    env.update(overrides)
    return env


def run_python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def production() -> dict[str, Any]:
    script = (
        "import json, koordweb.settings.production as s; "
        f"print(json.dumps({{k: getattr(s, k) for k in {PRODUCTION_KEYS!r}}}))"
    )
    done = run_python(["-c", script], production_env())
    assert done.returncode == 0, done.stderr
    values: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    values["SECURE_PROXY_SSL_HEADER"] = tuple(values["SECURE_PROXY_SSL_HEADER"])
    return values


def deploy_check(**overrides: str) -> tuple[int, list[str]]:
    done = run_python(["manage.py", "check", "--deploy"], production_env(**overrides))
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return done.returncode, lines


def test_check_deploy_is_clean() -> None:
    code, lines = deploy_check()
    assert code == 0, lines
    assert lines == ["System check identified no issues (0 silenced)."], lines


def test_check_deploy_warns_of_a_per_machine_cache_beside_rabbitmq() -> None:
    rabbit = "amqp://guest:guest@rabbit.example.org:5672//"
    code, lines = deploy_check(CELERY_BROKER_URL=rabbit, REDIS_URL="")
    assert code == 0  # a warning: one machine with RabbitMQ works
    assert any("koordweb.W001" in line and "per machine" in line for line in lines), lines
    assert any("REDIS_URL" in line for line in lines), lines
    shared = deploy_check(CELERY_BROKER_URL=rabbit, REDIS_URL="redis://cache.example.org:6379/0")
    assert shared[1] == ["System check identified no issues (0 silenced)."], shared[1]


def test_production_refuses_to_start_without_a_secret_key() -> None:
    done = run_python(["-c", "import koordweb.settings.production"], production_env(SECRET_KEY=""))
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr


def test_production_values(production: dict[str, Any]) -> None:
    assert production["DEBUG"] is False
    assert production["SECURE_SSL_REDIRECT"] is True
    assert production["SESSION_COOKIE_SECURE"] is True
    assert production["CSRF_COOKIE_SECURE"] is True
    assert production["SECURE_HSTS_SECONDS"] >= 31536000
    assert "script-src 'self'" in production["CONTENT_SECURITY_POLICY"]
    assert "'unsafe-eval'" not in production["CONTENT_SECURITY_POLICY"]


@pytest.fixture
def production_client(settings: Any, production: dict[str, Any]) -> Client:
    for key, value in production.items():
        setattr(settings, key, value)
    settings.ALLOWED_HOSTS = [HOST]
    return Client(HTTP_HOST=HOST)


def _assert_security_headers(response: Any) -> None:
    assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert "default-src 'self'" in response["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def test_plain_http_is_redirected_to_https(production_client: Client, db: Any) -> None:
    response = production_client.get("/login/")
    assert response.status_code == 301
    assert response["Location"] == f"https://{HOST}/login/"


def test_https_responses_carry_the_security_headers(production_client: Client, db: Any) -> None:
    for path in ("/login/", "/api/v1/jobs/", "/api/no-such-endpoint/"):
        response = production_client.get(path, secure=True)
        assert response.status_code in (200, 401, 403, 404), path
        _assert_security_headers(response)


def test_cookies_are_secure_and_session_cookie_http_only(
    production_client: Client, db: Any
) -> None:
    get_user_model().objects.create_user(username="carol", password="a-long-pass-phrase")
    page = production_client.get("/login/", secure=True)
    csrf = page.cookies["csrftoken"]
    assert csrf["secure"]
    response = production_client.post(
        "/login/", {"username": "carol", "password": "a-long-pass-phrase"}, secure=True
    )
    assert response.status_code == 302
    session = response.cookies["sessionid"]
    assert session["secure"] and session["httponly"]
    assert session["samesite"] == "Lax"
    _assert_security_headers(response)
