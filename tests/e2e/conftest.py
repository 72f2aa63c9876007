"""Browser fixtures: Debian's chromium through Playwright, offline, watched for console errors.

Every request to a host other than the live server's loopback address is aborted and recorded;
a test fails if any was made (a CDN leak) or if the page logged an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Route, sync_playwright
from pytest_django.live_server_helper import LiveServer

from koordweb.models import Cluster
from tests.e2e.browser import Watch
from tests.e2e.demo_data import seed

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make between
# page loads are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@pytest.fixture
def watch() -> Watch:
    return Watch()


@pytest.fixture
def browser_context(
    browser: Browser, live_server: LiveServer, watch: Watch
) -> Iterator[BrowserContext]:
    context = browser.new_context(
        base_url=live_server.url,
        viewport={"width": 1440, "height": 900},
    )

    def guard(route: Route) -> None:
        url = route.request.url
        host = urlparse(url).hostname or ""
        if urlparse(url).scheme in ("data", "blob") or host in LOOPBACK:
            route.continue_()
        else:
            watch.blocked.append(url)
            route.abort()

    context.route("**/*", guard)
    yield context
    context.close()


@pytest.fixture
def page(browser_context: BrowserContext, watch: Watch) -> Page:
    new_page = browser_context.new_page()
    new_page.on(
        "console",
        lambda message: watch.errors.append(message.text) if message.type == "error" else None,
    )
    new_page.on("pageerror", lambda error: watch.errors.append(str(error)))
    return new_page


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture
def demo(settings: Any, tmp_path: Path) -> Cluster:
    """The demo cluster (seed_demo) with its audit trail: the browser tests show the demo."""
    settings.VAR_DIR = tmp_path  # seed_demo writes its credentials file there, not into var/
    return seed()
