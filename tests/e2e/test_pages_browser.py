"""Every page in a real browser: offline (no CDN), no console errors, charts drawn, screenshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordweb.models import Job, JobState, Preemption, Round
from tests.e2e.conftest import Watch
from tests.e2e.demo_data import PASSWORD, seed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# (screenshot name, path, how many drawn .plotly charts the page must show at least)
PAGES = [
    ("overview", "/", 2),
    ("topology", "/topology/?resource=nvidia.com/gpu&count=8&cpu=0&memory=0", 2),
    ("devices", "/devices/", 1),
    ("jobs", "/jobs/", 0),
    ("preemptions", "/preemptions/", 1),
    ("quotas", "/quotas/", 1),
    ("rounds", "/rounds/", 1),
    ("import", "/import/", 0),
    ("tokens", "/tokens/", 0),
    ("job-submit", "/jobs/submit/", 0),
]


def log_in(page: object, username: str) -> None:
    page.goto("/login/")  # type: ignore[attr-defined]
    page.fill("input[name=username]", username)  # type: ignore[attr-defined]
    page.fill("input[name=password]", PASSWORD)  # type: ignore[attr-defined]
    page.click("button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url("**/")  # type: ignore[attr-defined]


def drawn_charts(page: object, at_least: int) -> int:
    """Charts whose plotly root exists and holds at least one trace."""
    if at_least:
        page.wait_for_function(  # type: ignore[attr-defined]
            "n => [...document.querySelectorAll('[data-figure]')]"
            ".filter(el => el.classList.contains('js-plotly-plot') && el.data && el.data.length)"
            ".length >= n",
            arg=at_least,
            timeout=20_000,
        )
    return page.evaluate(  # type: ignore[attr-defined, no-any-return]
        "[...document.querySelectorAll('.js-plotly-plot')].filter(el => el.data && el.data.length)"
        ".length"
    )


def test_every_page_as_admin(page: object, watch: Watch, screenshots: Path, tmp_path: Path) -> None:
    cluster = seed(tmp_path)
    log_in(page, "admin")
    for name, path, charts in PAGES:
        response = page.goto(path)  # type: ignore[attr-defined]
        assert response.status == 200, (name, response.status)
        assert drawn_charts(page, charts) >= charts, name
        assert page.locator(".plotly").count() >= charts, name  # type: ignore[attr-defined]
        page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]
    detail_pages = {
        "job-detail": f"/jobs/{Job.objects.filter(cluster=cluster, state=JobState.RUNNING).first().pk}/",
        "preemption-detail": f"/preemptions/{Preemption.objects.first().pk}/",
        "round-detail": f"/rounds/{Round.objects.filter(state='failed').first().pk}/",
    }
    for name, path in detail_pages.items():
        assert page.goto(path).status == 200, name  # type: ignore[attr-defined]
        if name != "round-detail":
            drawn_charts(page, 1)
        page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]
    watch.assert_clean()


def test_overview_refreshes_live_without_reload(page: object, watch: Watch, tmp_path: Path) -> None:
    cluster = seed(tmp_path)
    log_in(page, "admin")
    page.goto("/")  # type: ignore[attr-defined]
    drawn_charts(page, 2)
    before = int(page.inner_text("[data-count=pending]"))  # type: ignore[attr-defined]
    job = Job.objects.filter(cluster=cluster, state=JobState.RUNNING).first()
    job.state = JobState.PENDING
    job.save(update_fields=["state"])
    page.evaluate("document.body.dataset.marker = 'same-document'")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "n => Number(document.querySelector('[data-count=pending]').textContent) === n",
        arg=before + 1,
        timeout=25_000,
    )
    # The partial was swapped in place (no navigation) and its charts were drawn again.
    assert page.evaluate("document.body.dataset.marker") == "same-document"  # type: ignore[attr-defined]
    assert drawn_charts(page, 2) >= 2
    watch.assert_clean()


def test_tenant_sees_only_their_jobs(page: object, watch: Watch, tmp_path: Path) -> None:
    cluster = seed(tmp_path)
    log_in(page, "alice")
    page.goto("/jobs/?state=all")  # type: ignore[attr-defined]
    quotas = set(page.locator("table tbody tr td:nth-child(4)").all_inner_texts())  # type: ignore[attr-defined]
    assert quotas and quotas <= {"team-vision"}
    foreign = Job.objects.filter(cluster=cluster).exclude(quota__name="team-vision").first()
    assert page.goto(f"/jobs/{foreign.pk}/").status == 404  # type: ignore[attr-defined]
    assert page.goto("/import/").status == 403  # type: ignore[attr-defined]
    # Error pages are plain Django pages: they must not leak requests either.
    watch.blocked and watch.assert_clean()
    assert not watch.blocked
