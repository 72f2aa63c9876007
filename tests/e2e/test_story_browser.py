"""The story an admin lives through, driven in a real browser with a real Celery worker:
submit a job -> a round places it (seen on its page) -> a production job arrives that does not
fit -> a round preempts lower-priority work (seen on the preemptions page) -> it runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from playwright.sync_api import Page

from koordweb.celery import app
from koordweb.models import Cluster, Job, JobState, Pod, PodPhase, Preemption
from tests.e2e.browser import Watch, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def wait_for(check, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def submit(page: Page, **fields: str) -> None:
    page.goto("/jobs/submit/")
    for name, value in fields.items():
        selector = f"[name={name}]"
        if page.locator(f"select{selector}").count():
            page.select_option(selector, value)
        else:
            page.fill(selector, value)
    page.click("form.submit-job button[value=submit]")
    page.wait_for_load_state()
    errors = page.locator(".errorlist").all_inner_texts()
    assert not errors, f"the form refused {fields.get('name')}: {errors}"


def free_h800_nodes(cluster: Cluster) -> int:
    busy = set(
        Pod.objects.filter(
            cluster=cluster, node__isnull=False, phase__in=[PodPhase.PENDING, PodPhase.RUNNING]
        ).values_list("node_id", flat=True)
    )
    return sum(
        1
        for node in cluster.nodes.all()
        if node.labels.get("node.koordinator.sh/gpu-model") == "H800" and node.id not in busy
    )


def test_submit_round_placement_preemption_story(
    page: Page, watch: Watch, demo: Cluster, screenshots: Path, celery_queue: str
) -> None:
    with start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=60, queues=[celery_queue]
    ):
        log_in(page, "admin")
        # 1. A batch job is submitted through the form; the round after the commit places it.
        submit(
            page,
            name="story-train",
            namespace="team-vision",
            priority_class="koord-batch",
            replicas="2",
            gpus="8",
            gather_layer="BlockLayer",
            gather_strategy="MustGather",
        )
        train = Job.objects.get(name="story-train")
        wait_for(lambda: Job.objects.get(pk=train.pk).state != JobState.PENDING, "a placement")
        page.goto(f"/jobs/{train.pk}/")
        assert "BlockLayer/" in page.content()
        # 2. Free-tier work fills every H800 node still free.
        free = free_h800_nodes(demo)
        assert free > 0
        submit(
            page,
            name="story-fill",
            namespace="team-speech",
            priority_class="koord-free",
            replicas=str(free),
            gpus="8",
        )
        fill = Job.objects.get(name="story-fill")
        wait_for(lambda: Job.objects.get(pk=fill.pk).state != JobState.PENDING, "the fill")
        assert free_h800_nodes(demo) == 0
        # 3. A production job needs a whole free pair of nodes in one block: only preemption helps.
        submit(
            page,
            name="story-prod",
            namespace="team-nlp",
            priority_class="koord-prod",
            replicas="2",
            gpus="8",
            gather_layer="BlockLayer",
            gather_strategy="MustGather",
        )
        prod = Job.objects.get(name="story-prod")
        wait_for(lambda: Preemption.objects.filter(preemptor=prod).exists(), "a preemption")
        preemption = Preemption.objects.get(preemptor=prod)
        victims = [v.job for v in preemption.victims.select_related("job")]
        assert victims and all(v.priority < prod.priority for v in victims)
        # The freed nodes are the preemptor's: a later round binds it there.
        app.send_task("koordweb.run_round", args=[demo.id, "manual"])
        wait_for(
            lambda: Job.objects.get(pk=prod.pk).state in (JobState.SCHEDULED, JobState.RUNNING),
            "the preemptor's placement",
        )
    page.goto("/preemptions/")
    page.wait_for_selector(".js-plotly-plot")
    assert "story-prod" in page.content()
    page.goto(f"/preemptions/{preemption.pk}/")
    for victim in victims:
        assert victim.name in page.content()
    page.screenshot(path=str(screenshots / "story-preemption.png"), full_page=True)
    page.goto(f"/jobs/{prod.pk}/")
    assert "story-prod" in page.content()
    watch.assert_clean()
