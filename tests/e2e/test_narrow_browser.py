"""Every page at a laptop's 1366 x 768 and a phone's 390 px: nothing wider than the screen, and on
the phone the navigation is one bar with a menu button (opened without scripts' help)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from koordweb.models import Cluster, Job, JobState
from tests.e2e.browser import Watch, drawn_charts, log_in
from tests.e2e.test_pages_browser import PAGES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAPTOP = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}
# The bar on a phone: the brand and the menu button in one row (it was 240 px of wrapped links).
PHONE_BAR_MAX_PX = 60


def _overflow(page: Page) -> int:
    """How many pixels the page is wider than the window (0 when it fits)."""
    return page.evaluate(
        "Math.max(0, document.documentElement.scrollWidth - document.documentElement.clientWidth)"
    )


def _walk(page: Page, pages: list[tuple[str, str, int]], width: int) -> dict[str, int]:
    too_wide = {}
    for name, path, charts in pages:
        assert page.goto(path).status == 200, name
        # A tenant's page may have fewer charts (an empty timeline says so in words instead).
        drawn_charts(page, min(charts, page.locator("[data-figure]").count()))
        if _overflow(page):
            too_wide[f"{name} at {width} px"] = _overflow(page)
    return too_wide


@pytest.mark.parametrize("user", ["admin", "alice"])
def test_no_page_is_wider_than_a_laptop_or_a_phone(
    page: Page, watch: Watch, demo: Cluster, user: str
) -> None:
    pages = [p for p in PAGES if user == "admin" or p[0] != "import"]
    job = Job.objects.filter(cluster=demo, state=JobState.RUNNING, quota__name="team-vision")
    pages.append(("job-detail", f"/jobs/{job.first().pk}/", 1))
    log_in(page, user)
    too_wide: dict[str, int] = {}
    for size in (LAPTOP, PHONE):
        page.set_viewport_size(size)
        too_wide |= _walk(page, pages, size["width"])
    assert not too_wide, too_wide
    watch.assert_clean()


def test_the_phone_bar_is_one_row_with_a_menu(
    page: Page, watch: Watch, demo: Cluster, screenshots: Path
) -> None:
    page.set_viewport_size(PHONE)
    log_in(page, "admin")
    page.goto("/quotas/")
    bar = page.locator("header.topbar")
    assert bar.bounding_box()["height"] <= PHONE_BAR_MAX_PX
    expect(page.locator("nav.pages")).to_be_hidden()
    expect(page.locator("form.cluster-switch select")).to_be_hidden()
    page.screenshot(path=str(screenshots / "phone-quotas.png"))
    # The menu opens on a tap (a checkbox's label: no script involved) and leads to every page.
    page.click("label.menu-button")
    expect(page.locator("nav.pages a", has_text="Rounds")).to_be_visible()
    expect(page.locator("form.cluster-switch select")).to_be_visible()
    expect(page.locator("form.logout button")).to_be_visible()
    assert _overflow(page) == 0
    page.screenshot(path=str(screenshots / "phone-menu.png"))
    page.click("nav.pages a:has-text('Rounds')")
    page.wait_for_url("**/rounds/")
    expect(page.locator("nav.pages")).to_be_hidden()  # closed again on the next page
    # Keyboard: the checkbox is reachable and toggles the menu with the space bar.
    page.focus("input.menu-toggle")
    page.keyboard.press("Space")
    expect(page.locator("nav.pages a", has_text="Overview")).to_be_visible()
    # On a laptop the bar shows the pages and no menu button.
    page.set_viewport_size(LAPTOP)
    expect(page.locator("label.menu-button")).to_be_hidden()
    expect(page.locator("nav.pages a", has_text="Quotas")).to_be_visible()
    watch.assert_clean()
