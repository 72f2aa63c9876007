"""Swagger UI at /api/docs/ in a real browser, under the site's CSP (issue #16 item 9).

The CSP forbids inline scripts; the page must still draw the API's operations, and chromium must
report no CSP violation (a violation is a console error, which `watch` fails on).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page

from tests.e2e.browser import Watch

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "docs-reader-pw-1234"


def test_swagger_ui_draws_the_api_under_the_csp(page: Page, watch: Watch, settings: Any) -> None:
    get_user_model().objects.create_user(username="reader", password=PASSWORD)
    page.goto("/login/")
    page.fill("input[name=username]", "reader")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    response = page.goto("/api/docs/")
    assert response is not None and response.status == 200
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split("style-src")[0]
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    assert "koordweb API" in page.inner_text(".swagger-ui .info")
    assert page.locator(".swagger-ui .opblock").count() > 10
    watch.assert_clean()
