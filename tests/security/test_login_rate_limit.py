"""Login rate limiting: 5 failed logins per 5 minutes per account, 20 (here) per client address.

Runs against the rate-limited backend and view exactly as the settings lines in the report wire
them, on a private cache. Addresses come from TEST-NET-1 (192.0.2.0/24) so they never collide
with the 127.0.0.1 of other tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.test import Client

from koordweb.security import LoginRateLimiter

PASSWORD = "correct horse battery staple"
ADDRESS_LIMIT = 20


@pytest.fixture(autouse=True)
def _rate_limited_login(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.security.login_urls"
    settings.AUTHENTICATION_BACKENDS = ["koordweb.security.RateLimitedModelBackend"]
    settings.KOORDWEB_LOGIN_FAILURE_LIMIT = 5
    settings.KOORDWEB_LOGIN_FAILURE_WINDOW = 300
    settings.KOORDWEB_LOGIN_ADDRESS_FAILURE_LIMIT = ADDRESS_LIMIT
    settings.KOORDWEB_TRUSTED_PROXIES = []


@pytest.fixture
def alice(db: Any) -> Any:
    return get_user_model().objects.create_user(username="alice", password=PASSWORD)


def attempt(client: Client, username: str, password: str, ip: str, path: str = "/login/") -> Any:
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_five_failures_lock_the_name_with_429_and_retry_after(alice: Any) -> None:
    client = Client()
    for number in range(5):
        response = attempt(client, "alice", f"wrong-{number}", "192.0.2.1")
        assert response.status_code == 200  # the form again, with its error
    # Even the right password is not checked now, from any address.
    response = attempt(client, "alice", PASSWORD, "192.0.2.2")
    assert response.status_code == 429
    assert 295 <= int(response["Retry-After"]) <= 300
    assert b"Too many failed login attempts" in response.content
    assert "_auth_user_id" not in client.session


def test_names_are_matched_case_insensitively(alice: Any) -> None:
    client = Client()
    for name in ("alice", "ALICE", "Alice", "aLiCe", "alice "):
        attempt(client, name, "wrong", "192.0.2.3")
    assert attempt(client, "alice", PASSWORD, "192.0.2.4").status_code == 429


def test_one_address_guessing_many_names_is_locked(alice: Any) -> None:
    client = Client()
    for number in range(ADDRESS_LIMIT):
        assert attempt(client, f"user{number}", "guess", "192.0.2.5").status_code == 200
    assert attempt(client, "alice", PASSWORD, "192.0.2.5").status_code == 429
    # Another address is not affected, and alice's own budget was never touched.
    response = attempt(client, "alice", PASSWORD, "192.0.2.6")
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(alice.pk)


def test_success_clears_the_name_but_not_the_address(alice: Any) -> None:
    client = Client()
    for _ in range(4):
        attempt(client, "alice", "wrong", "192.0.2.7")
    assert attempt(client, "alice", PASSWORD, "192.0.2.7").status_code == 302
    # alice's count is back to 0, but the address keeps its 4 failures: the rest of its
    # budget, spent on other names, locks it.
    Client().post("/logout/")
    for number in range(ADDRESS_LIMIT - 4):
        attempt(Client(), f"mallory{number}", "wrong", "192.0.2.7")
    assert attempt(Client(), "alice", PASSWORD, "192.0.2.7").status_code == 429
    assert attempt(Client(), "alice", PASSWORD, "192.0.2.8").status_code == 302


def test_the_window_expires(alice: Any, monkeypatch: Any) -> None:
    import koordweb.security as security

    clock = [1_000_000.0]
    monkeypatch.setattr(security.time, "time", lambda: clock[0])
    limiter = LoginRateLimiter(limit=5, window=300)
    for _ in range(5):
        limiter.record_failure("alice", "192.0.2.9")
    assert limiter.retry_after("alice", "192.0.2.9") == 300
    clock[0] += 120
    assert limiter.retry_after("alice", "192.0.2.9") == 180
    limiter.clear("alice", "192.0.2.9")  # the cache's own expiry, which the clock cannot move
    assert limiter.retry_after("alice", "192.0.2.9") == 0


def test_the_admin_login_is_limited_too(alice: Any) -> None:
    """The backend refuses password checks everywhere, so /admin/login/ cannot be used instead."""
    alice.is_staff = True
    alice.save()
    client = Client()
    for _ in range(5):
        attempt(client, "alice", "wrong", "192.0.2.10", path="/admin/login/")
    response = attempt(client, "alice", PASSWORD, "192.0.2.11", path="/admin/login/")
    assert response.status_code == 200  # the admin's form again: refused, not logged in
    assert "_auth_user_id" not in client.session
    assert auth.authenticate(None, username="alice", password=PASSWORD) is None


def test_odd_user_names_make_valid_cache_keys(db: Any) -> None:
    client = Client()
    for name in ("x" * 10_000, "名前 with spaces", "\u202eevil", "a:b/c\\d"):
        response = attempt(client, name, "wrong", "192.0.2.12")
        assert response.status_code in (200, 429)


def test_one_users_failures_do_not_lock_others_behind_the_same_address(alice: Any, db: Any) -> None:
    """Issue #16 item 8: five wrong passwords for alice lock alice, not bob on the same proxy."""
    bob = get_user_model().objects.create_user(username="bob", password=PASSWORD)
    for number in range(5):
        attempt(Client(), "alice", f"wrong-{number}", "192.0.2.20")
    assert attempt(Client(), "alice", PASSWORD, "192.0.2.20").status_code == 429
    client = Client()
    assert attempt(client, "bob", PASSWORD, "192.0.2.20").status_code == 302
    assert client.session["_auth_user_id"] == str(bob.pk)


def test_a_trusted_proxy_forwards_the_client_address(alice: Any, settings: Any) -> None:
    """Behind a trusted proxy each client has its own address budget; a forged left-most
    X-Forwarded-For entry does not move the budget (the proxy appends the real peer)."""
    settings.KOORDWEB_TRUSTED_PROXIES = ["10.0.0.0/8"]

    def through_proxy(name: str, password: str, forwarded: str) -> Any:
        return Client().post(
            "/login/",
            {"username": name, "password": password},
            REMOTE_ADDR="10.0.0.7",
            HTTP_X_FORWARDED_FOR=forwarded,
        )

    for number in range(ADDRESS_LIMIT):
        # The sprayer forges a different left-most entry each time; the proxy appended its peer.
        through_proxy(f"user{number}", "guess", f"198.51.100.{number}, 192.0.2.30")
    assert through_proxy("alice", PASSWORD, "192.0.2.30").status_code == 429
    assert through_proxy("alice", PASSWORD, "192.0.2.31").status_code == 302


def test_x_forwarded_for_is_ignored_without_trusted_proxies(alice: Any) -> None:
    for number in range(ADDRESS_LIMIT):
        Client().post(
            "/login/",
            {"username": f"user{number}", "password": "guess"},
            REMOTE_ADDR="192.0.2.40",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{number}",
        )
    assert attempt(Client(), "alice", PASSWORD, "192.0.2.40").status_code == 429
