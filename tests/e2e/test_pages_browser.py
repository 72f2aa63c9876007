"""Every page in a real browser: offline (no CDN), no console errors, charts drawn, screenshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page

from koordweb.models import Cluster, Job, JobState, Preemption, Round
from tests.e2e.browser import Watch, drawn_charts, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# (screenshot name, path, how many drawn .plotly charts the page must show at least)
PAGES = [
    ("overview", "/", 2),
    ("topology", "/topology/?resource=nvidia.com/gpu&count=8&cpu=0&memory=0", 2),
    ("devices", "/devices/", 1),
    ("devices-utilisation", "/devices/?view=utilisation", 1),
    ("devices-idle", "/devices/?view=idle&show=idle", 1),
    ("nodes", "/nodes/", 1),
    ("efficiency", "/efficiency/", 3),
    ("jobs", "/jobs/", 0),
    ("preemptions", "/preemptions/", 1),
    ("quotas", "/quotas/", 1),
    ("rounds", "/rounds/", 1),
    ("import", "/import/", 0),
    ("tokens", "/tokens/", 0),
    ("job-submit", "/jobs/submit/", 0),
]


def test_every_page_as_admin(page: Page, watch: Watch, screenshots: Path, demo: Cluster) -> None:
    cluster = demo
    log_in(page, "admin")
    for name, path, charts in PAGES:
        response = page.goto(path)
        assert response.status == 200, (name, response.status)
        assert drawn_charts(page, charts) >= charts, name
        assert page.locator(".plotly").count() >= charts, name
        page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
    running = Job.objects.filter(cluster=cluster, state=JobState.RUNNING).first()
    pending = Job.objects.filter(cluster=cluster, decisions__isnull=False).first()
    assert running is not None and pending is not None
    detail_pages = {
        "job-detail": f"/jobs/{running.pk}/",
        "job-pending": f"/jobs/{pending.pk}/",
        "preemption-detail": f"/preemptions/{Preemption.objects.first().pk}/",
        "round-detail": f"/rounds/{Round.objects.filter(state='failed').first().pk}/",
    }
    for name, path in detail_pages.items():
        assert page.goto(path).status == 200, name
        if name not in ("round-detail", "job-pending"):
            drawn_charts(page, 1)
        page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
    # The demo's koordlet reported: node use and the cards' utilisation are drawn, not "none".
    page.goto("/")
    assert "No node has reported its usage yet" not in page.inner_text("main")
    # The idle notebook: flagged in the jobs table, its usage over its life on its page.
    notebook = Job.objects.get(cluster=cluster, name="jupyter-notebook")
    page.goto("/jobs/?state=active")
    flagged = page.locator(f"tr[data-job='{notebook.name}']")
    assert "idle for" in flagged.inner_text()
    page.locator("table").first.screenshot(path=str(screenshots / "jobs-idle-flag.png"))
    page.goto(f"/jobs/{notebook.pk}/")
    drawn_charts(page, 2)
    usage = page.locator("section[aria-label='card usage']")
    assert "efficiency" in usage.inner_text()
    usage.screenshot(path=str(screenshots / "job-gpu-usage.png"))
    # The submit page with a what-if answer: where a 2 x 8-GPU job would run, in words.
    page.goto("/jobs/submit/")
    page.fill("input[name=name]", "what-if-demo")
    page.fill("input[name=replicas]", "2")
    page.select_option("select[name=gather_layer]", "BlockLayer")
    page.click("button[value=what-if]")
    page.wait_for_selector("[data-outcome]")
    drawn_charts(page, 1)  # the plan's placement, outlined on the domain tree
    page.screenshot(path=str(screenshots / "job-submit.png"), full_page=True)
    watch.assert_clean()


def test_overview_refreshes_live_without_reload(page: Page, watch: Watch, demo: Cluster) -> None:
    cluster = demo
    log_in(page, "admin")
    page.goto("/")
    drawn_charts(page, 2)
    before = int(page.inner_text("[data-count=pending]"))
    job = Job.objects.filter(cluster=cluster, state=JobState.RUNNING).first()
    job.state = JobState.PENDING
    job.save(update_fields=["state"])
    page.evaluate("document.body.dataset.marker = 'same-document'")
    page.wait_for_function(
        "n => Number(document.querySelector('[data-count=pending]').textContent) === n",
        arg=before + 1,
        timeout=25_000,
    )
    # The partial was swapped in place (no navigation) and its charts were drawn again.
    assert page.evaluate("document.body.dataset.marker") == "same-document"
    assert drawn_charts(page, 2) >= 2
    watch.assert_clean()


def test_tenant_sees_only_their_jobs(page: Page, watch: Watch, demo: Cluster) -> None:
    cluster = demo
    log_in(page, "alice")
    page.goto("/jobs/?state=all")
    quotas = set(page.locator("table tbody tr td:nth-child(4)").all_inner_texts())
    assert quotas and quotas <= {"team-vision"}
    foreign = Job.objects.filter(cluster=cluster).exclude(quota__name="team-vision").first()
    assert page.goto(f"/jobs/{foreign.pk}/").status == 404
    assert page.goto("/import/").status == 403
    # The 404 and 403 answers log "Failed to load resource" in the console by design, so only
    # the network guard applies here.
    assert not watch.blocked, watch.blocked
