"""Layout defects seen in the screenshots (issue #37), in Chromium: the efficiency page's team
table fits its box at a laptop's width (and scrolls inside it on a phone), flash messages and
form errors carry no stray bullet, and the what-if answer has no empty area under it."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from koordweb.models import Cluster
from tests.e2e.browser import Watch, drawn_charts, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAPTOP = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}


def _clipped(page: Page, selector: str) -> int:
    """How many pixels of the element's content its box hides (0 when it fits)."""
    return page.evaluate(
        "s => { const el = document.querySelector(s); return el.scrollWidth - el.clientWidth; }",
        selector,
    )


def test_efficiency_team_table_fits_a_laptop_and_scrolls_on_a_phone(
    page: Page, watch: Watch, demo: Cluster
) -> None:
    log_in(page, "admin")
    page.set_viewport_size(LAPTOP)
    page.goto("/efficiency/")
    drawn_charts(page, 3)
    assert _clipped(page, "[data-table=teams]") == 0
    threshold = page.locator("[data-table=teams] th", has_text="Threshold")
    box = threshold.bounding_box()
    assert box is not None and box["x"] + box["width"] <= LAPTOP["width"]
    page.set_viewport_size(PHONE)
    page.goto("/efficiency/")
    drawn_charts(page, 3)
    # the page itself is no wider than the phone: the table scrolls inside its own box
    assert page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )
    watch.assert_clean()


def _bullet(page: Page, selector: str) -> str:
    page.wait_for_load_state("load")  # the stylesheets applied, not only the element in the DOM
    return page.evaluate("s => getComputedStyle(document.querySelector(s)).listStyleType", selector)


def test_flash_messages_and_form_errors_have_no_bullet(
    page: Page, watch: Watch, demo: Cluster
) -> None:
    log_in(page, "admin")
    page.goto("/nodes/")
    page.locator("form.cordon button").first.click()
    page.wait_for_selector("ul.messages li")
    assert _bullet(page, "ul.messages li") == "none"
    page.goto("/quotas/team-nlp/edit/")
    page.fill("input[name=min_1]", "100000")  # memory far above its max
    page.fill("input[name=max_1]", "1")
    page.click("form.quota-edit button[type=submit]")
    page.wait_for_selector(".errorlist li")
    assert _bullet(page, ".errorlist li") == "none"
    assert "is above the maximum" in page.inner_text(".errorlist")
    watch.assert_clean()


def test_what_if_answer_has_no_empty_area(page: Page, watch: Watch, demo: Cluster) -> None:
    log_in(page, "admin")
    page.goto("/jobs/submit/")
    page.fill("input[name=name]", "what-if-layout")
    page.fill("input[name=replicas]", "2")
    page.select_option("select[name=gather_layer]", "BlockLayer")
    page.click("button[value=what-if]")
    page.wait_for_selector("[data-outcome]")
    drawn_charts(page, 1)
    # the box ends near its last drawn part: no blank block the height of an undrawn chart
    gap = page.evaluate(
        """() => {
            const box = document.querySelector('article.what-if');
            const parts = [...box.children].filter(el => el.offsetHeight > 0);
            const last = Math.max(...parts.map(el => el.getBoundingClientRect().bottom));
            return box.getBoundingClientRect().bottom - last;
        }"""
    )
    assert gap <= 48, gap
    figure = page.locator("article.what-if [data-figure]")
    if figure.count():
        height = figure.evaluate("el => el.getBoundingClientRect().height")
        plotted = figure.evaluate(
            "el => el.querySelector('.main-svg') ? el.querySelector('.main-svg')"
            ".getBoundingClientRect().height : 0"
        )
        assert plotted >= height - 8, (plotted, height)
    watch.assert_clean()
