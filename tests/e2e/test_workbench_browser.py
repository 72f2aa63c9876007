"""The admin's workbench in Chromium (issue #37): the jobs table filtered and sorted, a quota
edited with units, and the preemptions page paged with one timeline bar per preemption."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page

from koordweb.models import Cluster, ElasticQuota, Job, JobState, Preemption, QuotaChange
from tests.builders import JobFactory, PreemptionFactory, VictimFactory
from tests.e2e.browser import Watch, drawn_charts, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
GPU = "nvidia.com/gpu"


def _names(page: Page) -> list[str]:
    return page.eval_on_selector_all("tr[data-job]", "rows => rows.map(r => r.dataset.job)")


def test_jobs_table_filters_and_sorts(
    page: Page, watch: Watch, demo: Cluster, screenshots: Path
) -> None:
    log_in(page, "admin")
    team = (
        Job.objects.filter(cluster=demo).exclude(quota=None).values_list("quota__name", flat=True)
    )
    chosen = sorted(set(team))[0]
    page.goto("/jobs/")
    page.select_option("select[name=state]", "all")
    page.select_option("select[name=team]", chosen)
    page.click("form.job-filters button[type=submit]")
    page.wait_for_load_state()
    shown = _names(page)
    expected = Job.objects.filter(cluster=demo, quota__name=chosen)
    assert shown and set(shown) <= set(expected.values_list("name", flat=True))
    assert int(page.inner_text("[data-count=jobs]").replace(",", "")) == expected.count()
    # Sort by cards, most first: each row's count is no more than the one above.
    page.select_option("select[name=team]", "")
    page.select_option("select[name=sort]", "-gpus")
    page.click("form.job-filters button[type=submit]")
    page.wait_for_load_state()
    cards = [
        float(m[1].replace(",", "")) if (m := re.match(r"([\d.,]+)", text)) else 0.0
        for text in page.locator("td.cards").all_inner_texts()
    ]
    assert cards and cards == sorted(cards, reverse=True) and cards[0] > 0
    # The column header sorts too: longest wait first.
    page.click("th a[data-sort=wait]")
    page.wait_for_load_state()
    assert "sort=-wait" in page.url
    assert page.locator("td.wait").count() > 0
    page.screenshot(path=str(screenshots / "jobs-table.png"), full_page=False)
    watch.assert_clean()


def test_quota_edit_form(page: Page, watch: Watch, demo: Cluster, screenshots: Path) -> None:
    quota = ElasticQuota.objects.filter(cluster=demo, is_parent=False).order_by("name").first()
    assert quota is not None
    log_in(page, "admin")
    page.goto("/quotas/")
    assert page.locator("td.idle-threshold").count() > 0
    page.click(f"a[href='/quotas/{quota.name}/edit/']")
    page.wait_for_load_state()
    row = page.locator("form.quota-edit tbody tr", has_text="Memory (GiB)")
    row.locator("input").nth(1).fill("600")  # max memory, in GiB
    page.fill("input[name=gpu_idle_alert_minutes]", "45")
    page.click("form.quota-edit button[type=submit]")
    page.wait_for_load_state()
    quota.refresh_from_db()
    assert quota.max["memory"] == 600 * 1024**3 and quota.gpu_idle_alert_minutes == 45
    assert QuotaChange.objects.filter(quota=quota).count() == 1
    assert "600 GiB" in page.inner_text(".quota-history")
    # A min above the max is refused with the reason, and nothing changes.
    row = page.locator("form.quota-edit tbody tr", has_text="Memory (GiB)")
    row.locator("input").nth(0).fill("700")
    page.click("form.quota-edit button[type=submit]")
    page.wait_for_load_state()
    assert "is above the maximum" in page.inner_text("form.quota-edit .error")
    quota.refresh_from_db()
    assert (
        quota.max["memory"] == 600 * 1024**3
        and QuotaChange.objects.filter(quota=quota).count() == 1
    )
    page.screenshot(path=str(screenshots / "quota-edit.png"), full_page=True)
    watch.assert_clean()


def test_preemptions_page_pages(page: Page, watch: Watch, demo: Cluster, screenshots: Path) -> None:
    now = timezone.now()
    preemptor = Job.objects.filter(cluster=demo, state=JobState.RUNNING).first()
    assert preemptor is not None
    for i in range(30):
        item = PreemptionFactory(
            cluster=demo,
            preemptor=preemptor,
            reason="needs block b1",
            cost={},
            created_at=now - timedelta(minutes=5 + i),
        )
        for v in range(14):
            victim = JobFactory(
                cluster=demo,
                name=f"paged-{i}-{v}",
                quota=preemptor.quota,
                state=JobState.PREEMPTED,
                started_at=now - timedelta(hours=2),
            )
            VictimFactory(preemption=item, job=victim, pods=[f"default/paged-{i}-{v}-0"])
    total = Preemption.objects.filter(cluster=demo).count()
    log_in(page, "admin")
    page.goto("/preemptions/")
    assert drawn_charts(page, 1) >= 1
    assert int(page.inner_text("[data-count=preemptions]")) == total
    assert page.locator("table.compact tbody tr").count() == 20
    # One bar per preemption on the page, never one per victim (14 each here).
    bars = page.evaluate(
        "(() => { const d = document.querySelector('[data-figure=fig-timeline]').data;"
        " return d[0].y.length + (d[2] ? d[2].y.length : 0); })()"
    )
    assert bars <= 20
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 4000, height
    page.click("nav.pager a")
    page.wait_for_load_state()
    assert "page=2" in page.url and "page 2 of" in page.inner_text("nav.pager")
    page.screenshot(path=str(screenshots / "preemptions-paged.png"), full_page=True)
    watch.assert_clean()
