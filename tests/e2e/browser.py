"""What the browser tests share: the watch for what a page must not do, logging in as a demo
user and counting drawn charts."""

from __future__ import annotations

from dataclasses import dataclass, field

from playwright.sync_api import Page

from tests.e2e.demo_data import PASSWORD


@dataclass
class Watch:
    """What a page did that it must not: leave the machine, or log an error."""

    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert not self.blocked, f"requests to non-loopback hosts: {self.blocked}"
        assert not self.errors, f"console errors: {self.errors}"


def log_in(page: Page, username: str) -> None:
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/")


def drawn_charts(page: Page, at_least: int) -> int:
    """Charts whose plotly root exists and holds at least one trace."""
    if at_least:
        page.wait_for_function(
            "n => [...document.querySelectorAll('[data-figure]')]"
            ".filter(el => el.classList.contains('js-plotly-plot') && el.data && el.data.length)"
            ".length >= n",
            arg=at_least,
            timeout=20_000,
        )
    return page.evaluate(
        "[...document.querySelectorAll('.js-plotly-plot')].filter(el => el.data && el.data.length)"
        ".length"
    )
