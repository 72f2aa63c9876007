"""Issue 19, item by item, in Chromium at 1440x900 on the demo: plain words, units, jobs that can
never fit, several clusters, devices counted, live pages, the preemption timeline, the overview,
and the smaller fixes. Each test fails on the code before the issue."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from koordweb.models import (
    Cluster,
    Decision,
    Device,
    ElasticQuota,
    Job,
    JobState,
    Node,
    Pod,
    PodPhase,
    Preemption,
    PreemptionVictim,
    PriorityClass,
    Round,
)
from tests.builders import RoundFactory
from tests.e2e.browser import Watch, drawn_charts, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ENGINE_WORDS = ("desiredOfferSlot", "exceedDimensions", "None slots", "quotaName", "{'")
E_NOTATION = re.compile(r"\b\d+(\.\d+)?e[+-]?\d+\b", re.I)
LIVE = 30_000  # ms: a live page polls every 5-10 s


def body_text(page: Page) -> str:
    return page.inner_text("body")


def assert_plain(page: Page) -> None:
    text = body_text(page)
    for word in ENGINE_WORDS:
        assert word not in text, (page.url, word)
    assert not E_NOTATION.search(text), (page.url, E_NOTATION.search(text))


def a_round(cluster: Cluster) -> Round:
    now = timezone.now()
    return RoundFactory(cluster=cluster, started_at=now, finished_at=now)


def test_1_engine_decisions_in_plain_words_with_details(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    job = Job.objects.filter(cluster=demo, state=JobState.PENDING).first()
    rnd = a_round(demo)
    Decision.objects.create(
        round=rnd,
        job=job,
        outcome=Decision.Outcome.UNSCHEDULABLE,
        reason="Insufficient quotas, quotaName: team-nlp, exceedDimensions: [nvidia.com/gpu]",
        details={
            "plugin": "ElasticQuota",
            "quota": "team-nlp",
            "exceeded_dimensions": ["nvidia.com/gpu"],
            "quota_shortfall": {"team-nlp": {"nvidia.com/gpu": 8}},
            "runtime": {"nvidia.com/gpu": 192, "memory": 4398046511104},
        },
        created_at=rnd.started_at,
    )
    running = Job.objects.filter(cluster=demo, state=JobState.RUNNING).first()
    Decision.objects.create(
        round=rnd,
        job=running,
        outcome=Decision.Outcome.PLACED,
        reason="placed in nominated nodes (None slots for None pods)",
        details={"chosen_domain": "nominated nodes", "nominated": True},
        created_at=rnd.started_at,
    )
    log_in(page, "admin")
    page.goto(f"/jobs/{job.pk}/")
    why = page.locator("dd.reason .why")
    expect(why).to_have_text("Quota team-nlp has too little left: it needs 8 GPUs more.")
    page.locator("dd.reason details.engine summary").click()
    details = page.inner_text("dd.reason details.engine")
    assert "Quota short by" in details and "team-nlp: 8 GPUs" in details
    assert "4,096 GiB" in details  # the runtime share in GiB, never bytes or e-notation
    assert_plain(page)
    page.goto(f"/jobs/{running.pk}/")
    assert "Placed on the nodes a preemption reserved for it." in body_text(page)
    assert_plain(page)
    preemption = Preemption.objects.first()
    preemption.cost = {
        "highest_victim_priority": 3000,
        "victim_jobs": 1,
        "victim_pods": 2,
        "resources": {"nvidia.com/gpu": 16},
        "pdb_violations": {},
    }
    preemption.save(update_fields=["cost"])
    page.goto(f"/preemptions/{preemption.pk}/")
    cost = page.inner_text("dl.cost")
    assert "16 GPUs" in cost and "pdb_violations" not in cost
    assert_plain(page)
    watch.assert_clean()


def test_2_quantities_with_units_never_e_notation(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    ElasticQuota.objects.filter(cluster=demo, name="team-speech").update(
        max={
            "nvidia.com/gpu": 128,
            "cpu": 10_000_000,
            "memory": 42949672960,
            "cambricon.com/mlu.smlu.vmemory": 8589934592,
        }
    )
    log_in(page, "admin")
    page.goto("/quotas/")
    text = body_text(page)
    assert "40 GiB" in text and "8 GiB" in text and "10,000 cores" in text
    assert not E_NOTATION.search(text)
    page.goto("/topology/")
    free = page.inner_text("[data-free=cluster]")
    assert re.fullmatch(r"[\d,.]+ cards", free), free
    watch.assert_clean()


def test_3_a_job_that_can_never_fit_is_refused_in_submit_and_what_if(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    log_in(page, "admin")
    for action in ("what-if", "submit"):
        page.goto("/jobs/submit/")
        page.fill("input[name=name]", "too-wide")
        page.fill("input[name=replicas]", "10")
        page.fill("input[name=gpus]", "8")
        page.select_option("select[name=gather_layer]", "BlockLayer")
        page.select_option("select[name=gather_strategy]", "MustGather")
        page.click(f"button[value={action}]")
        error = page.locator("label:has(select[name=gather_layer]) small.error")
        expect(error).to_contain_text("can never run")
        expect(error).to_contain_text("the roomiest block")
        expect(error).to_contain_text("the job needs 10 pods together in one block")
        assert page.locator("[data-outcome]").count() == 0
    assert not Job.objects.filter(name="too-wide").exists()
    watch.assert_clean()


def test_3_counterfactual_never_proposes_quota_for_a_job_that_cannot_fit(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    job = Job.objects.filter(cluster=demo, state=JobState.PENDING).first()
    job.topology_spec = {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]}
    job.min_available = job.total_number = 10
    job.save()
    rnd = a_round(demo)
    Decision.objects.create(
        round=rnd,
        job=job,
        outcome=Decision.Outcome.UNSCHEDULABLE,
        reason="Insufficient quotas, quotaName: team-nlp, exceedDimensions: [nvidia.com/gpu]",
        details={
            "plugin": "ElasticQuota",
            "quota": "team-nlp",
            "counterfactual": {"quota_increase": {"team-nlp": {"nvidia.com/gpu": 80}}},
        },
        created_at=rnd.started_at,
    )
    Pod.objects.filter(job=job).update(requests={"nvidia.com/gpu": 8, "cpu": 8000})
    log_in(page, "admin")
    page.goto(f"/jobs/{job.pk}/")
    expect(page.locator("dd.reason .why")).to_contain_text("Can never run")
    # Only changes that would work: fewer pods or a looser rule, never more quota.
    expect(page.locator("dd.counterfactual")).to_have_text(
        "It could run as at most 8 pods with this rule or with MustGather on a spine "
        "(room for 32 pods)."
    )
    assert "more in quota" not in body_text(page)
    watch.assert_clean()


def test_4_the_cluster_switcher_carries_the_cluster_everywhere(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    lab = Cluster.objects.create(name="lab")
    node = Node.objects.create(
        cluster=lab, name="lab-node-1", allocatable={"cpu": 8000, "nvidia.com/gpu": 2}
    )
    for minor in range(2):
        Device.objects.create(
            node=node, device_type="gpu", vendor="nvidia", model="L4", minor=minor
        )
    log_in(page, "admin")
    page.select_option("form.cluster-switch select", "lab")  # submits on change
    page.wait_for_url("**/")
    expect(page.locator("[data-cluster-name]")).to_have_text("lab")
    expect(page.locator("form.cluster-switch select")).to_have_value("lab")
    page.evaluate("document.body.dataset.marker = 'same-document'")
    # The live refresh swaps in lab's numbers, not the default cluster's.
    page.wait_for_function(
        "() => document.querySelector('[data-live-cluster]').dataset.swapped === undefined"
    )
    page.evaluate("document.querySelector('[data-live-cluster]').dataset.swapped = 'no'")
    page.wait_for_function(
        "() => document.querySelector('[data-live-cluster]').dataset.swapped === undefined",
        timeout=LIVE,
    )
    assert page.evaluate("document.body.dataset.marker") == "same-document"
    expect(page.locator("[data-live-cluster]")).to_have_attribute("data-live-cluster", "lab")
    expect(page.locator("[data-accelerator]")).to_have_count(1)
    expect(page.locator("[data-accelerator]")).to_contain_text("NVIDIA L4")
    for path in ("/topology/", "/devices/", "/jobs/", "/quotas/", "/rounds/", "/preemptions/"):
        page.goto(path)
        expect(page.locator("h1 small")).to_have_text("lab")
        expect(page.locator("form.cluster-switch select")).to_have_value("lab")
    page.goto("/topology/")
    assert "This field is required" not in body_text(page)
    assert "nvidia.com/gpu" in page.locator("select[name=resource]").input_value()
    page.goto("/devices/")
    expect(page.locator("[data-count=cards]")).to_have_text("2")
    watch.assert_clean()


def test_5_devices_count_the_cluster_and_show_unhealthy_cards(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    broken = Device.objects.filter(node__cluster=demo, vendor="nvidia").order_by("id")[:3]
    Device.objects.filter(id__in=[d.id for d in broken]).update(health=False)
    total = Device.objects.filter(node__cluster=demo, device_type="gpu").count()
    log_in(page, "admin")
    page.goto("/devices/?vendor=huawei")
    expect(page.locator("[data-count=cards]")).to_have_text(str(total))
    expect(page.locator("[data-count=unhealthy]")).to_have_text("3")
    page.goto("/devices/")
    drawn_charts(page, 1)
    expect(page.locator("[data-unhealthy-list]")).to_contain_text("#")
    crosses = page.evaluate(
        "document.querySelector('[data-figure=fig-heatmap]').data"
        ".filter(t => t.name === 'unhealthy')[0].x.length"
    )
    assert crosses == 3
    page.goto("/")
    expect(page.locator("[data-count=unhealthy-cards]")).to_have_text("3")
    watch.assert_clean()


def test_6_job_page_and_lists_update_in_place_after_a_round(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    job = Job.objects.filter(cluster=demo, state=JobState.PENDING).order_by("id").first()
    log_in(page, "admin")
    page.goto(f"/jobs/{job.pk}/")
    expect(page.locator("dd.reason")).to_be_visible()
    page.evaluate("document.body.dataset.marker = 'same-document'")
    # A round places the job (what engine.records writes), while the page stays open.
    rnd = a_round(demo)
    nodes = list(Node.objects.filter(cluster=demo).order_by("name")[: job.total_number])
    for pod, node in zip(Pod.objects.filter(job=job).order_by("id"), nodes, strict=False):
        pod.node, pod.phase, pod.bound_at = node, PodPhase.RUNNING, rnd.started_at
        pod.save()
    Decision.objects.create(
        round=rnd,
        job=job,
        outcome=Decision.Outcome.PLACED,
        reason="placed",
        details={"chosen_domain": "BlockLayer/b1"},
        created_at=rnd.started_at,
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    placed = page.locator("[data-placed]")
    expect(placed).to_contain_text(f"(round #{rnd.pk})", timeout=LIVE)
    expect(placed).to_contain_text(f"placed on {nodes[0].name}")
    expect(page.locator("[data-job-state]")).to_have_text("Running")
    assert page.evaluate("document.body.dataset.marker") == "same-document"

    page.goto("/jobs/?state=pending")
    other = Job.objects.filter(cluster=demo, state=JobState.PENDING).first()
    row = page.locator("tr", has_text=f"{other.namespace}/{other.name}")
    expect(row).to_have_count(1)
    Job.objects.filter(pk=other.pk).update(state=JobState.CANCELLED)
    expect(row).to_have_count(0, timeout=LIVE)

    page.goto("/preemptions/")
    before = int(page.inner_text("[data-count=preemptions]"))
    victim = Job.objects.filter(cluster=demo, state=JobState.RUNNING).exclude(pk=job.pk).first()
    made = Preemption.objects.create(
        cluster=demo,
        round=rnd,
        preemptor=job,
        state=Preemption.State.ENACTED,
        reason="lower-priority jobs evicted",
        created_at=timezone.now(),
    )
    PreemptionVictim.objects.create(preemption=made, job=victim, pods=[], freed={})
    expect(page.locator("[data-count=preemptions]")).to_have_text(str(before + 1), timeout=LIVE)

    page.goto("/devices/")
    Device.objects.filter(node__cluster=demo).order_by("id").filter(
        id=Device.objects.filter(node__cluster=demo).order_by("id").first().id
    ).update(health=False)
    expect(page.locator("[data-count=unhealthy]")).to_have_text("1", timeout=LIVE)
    watch.assert_clean()


def test_7_timeline_bars_end_at_the_preemption_and_link_to_jobs(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    preemption = Preemption.objects.first()
    victim = preemption.victims.first().job
    Job.objects.filter(pk=victim.pk).update(
        started_at=preemption.created_at - timedelta(seconds=20)
    )
    log_in(page, "admin")
    page.goto("/preemptions/")
    drawn_charts(page, 1)
    bars = page.evaluate("document.querySelector('[data-figure=fig-timeline]').data[0]")
    assert bars["x"] == [20_000]  # 20 s of lost run, no 60 s minimum past the preemption
    # One bar per preemption (issue #37 item 8): on the preemptor's row, a click to it; the
    # victims are linked from the table.
    assert bars["customdata"] == [f"/jobs/{preemption.preemptor_id}/"]
    links = page.evaluate(
        "[...document.querySelectorAll('[data-figure=fig-timeline] .ytick a')]"
        ".map(a => a.getAttribute('xlink:href') || a.getAttribute('href'))"
    )
    assert f"/jobs/{preemption.preemptor_id}/" in links
    assert page.locator(f"table a[href='/jobs/{victim.pk}/']").count() >= 1
    page.locator(f"table a[href='/jobs/{preemption.preemptor_id}/']").first.click()
    page.wait_for_url(f"**/jobs/{preemption.preemptor_id}/")
    watch.assert_clean()


def test_8_overview_is_an_admins_first_look(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    log_in(page, "admin")
    page.goto("/")
    drawn_charts(page, 3)
    h800 = page.locator("[data-accelerator='NVIDIA H800'] td")
    expect(h800.nth(3)).to_have_text("512")  # total cards
    expect(h800.nth(2)).to_have_text("512")  # healthy
    names = page.evaluate("document.querySelector('[data-figure=fig-resources]').data[1].y")
    assert names == ["CPU", "memory", "pods", "GPUs"]  # no raw device-share keys
    labels = page.evaluate("document.querySelector('[data-figure=fig-resources]').data[1].text")
    assert re.match(r"\d+ of 512 GPUs", labels[-1]), labels
    pods = int(labels[2].split(" ")[0])
    assert (
        pods
        == Pod.objects.filter(cluster=demo, node__isnull=False)
        .exclude(phase__in=[PodPhase.SUCCEEDED, PodPhase.FAILED])
        .count()
    )
    expect(page.locator("table[aria-label='queue demand'] tbody tr").first).to_contain_text("team-")
    expect(page.locator("[data-count=failed-rounds]")).to_have_text("1")
    expect(page.locator("[data-figure=fig-trend]")).to_be_visible()
    watch.assert_clean()


def test_10_smaller_fixes(page: Page, watch: Watch, demo: Cluster) -> None:
    # Pods sort naturally: -0, -1, ..., -9, -10.
    job = Job.objects.filter(cluster=demo, total_number__gte=11).first()
    log_in(page, "admin")
    page.goto(f"/jobs/{job.pk}/")
    names = page.locator("section:has(h2:text('Pods')) tbody td:first-child").all_inner_texts()
    numbers = [int(n.rsplit("-", 1)[1]) for n in names]
    assert numbers == sorted(numbers), names
    # Finished jobs get no place in the queue.
    finished = Job.objects.filter(cluster=demo).exclude(state=JobState.PENDING).first()
    Job.objects.filter(pk=finished.pk).update(state=JobState.SUCCEEDED)
    page.goto("/jobs/?state=all")
    row = page.locator("tr", has_text=f"{finished.namespace}/{finished.name}")
    expect(row.locator("td").first).to_have_text("")
    # Rounds chart: 120 rounds are bars, not needles; whole-number ticks.
    now = timezone.now()
    Round.objects.bulk_create(
        Round(
            cluster=demo,
            state=Round.State.SUCCEEDED,
            started_at=now - timedelta(seconds=i),
            duration_ms=40 + i % 7,
            jobs_placed=i % 3,
        )
        for i in range(120)
    )
    page.goto("/rounds/")
    drawn_charts(page, 1)
    widths = page.evaluate(
        "[...document.querySelectorAll('[data-figure=fig-rounds] .bars path')]"
        ".map(p => p.getBBox().width)"
    )
    assert widths and min(widths) >= 3, widths[:5]
    ticks = page.evaluate(
        "[...document.querySelectorAll('[data-figure=fig-rounds] .y2tick text')]"
        ".map(t => t.textContent)"
    )
    assert ticks and all(t.isdigit() for t in ticks), ticks
    # The import error is printed once.
    page.goto("/import/")
    page.fill("textarea[name=text]", "kind: [unclosed")
    page.uncheck("input[name=dry_run]")
    page.click("main form button[type=submit]")
    message = page.inner_text("div.error").strip()
    assert message and body_text(page).count(message) == 1, message
    # A favicon.
    href = page.locator("link[rel=icon]").get_attribute("href")
    assert page.request.get(href).status == 200
    # The import's 400 answer logs "Failed to load resource" by design; nothing else may.
    assert not watch.blocked and all("status of 400" in e for e in watch.errors), watch.errors


def test_10_tenants_get_usable_choices_and_a_403_with_navigation(
    page: Page,
    watch: Watch,
    demo: Cluster,
) -> None:
    PriorityClass.objects.create(cluster=demo, name="system-cluster-critical", value=2000001000)
    log_in(page, "alice")
    page.goto("/jobs/submit/")
    quotas = page.locator("select[name=quota] option").all_inner_texts()
    assert quotas == ["team-vision"], quotas
    # The options' values are the class names (their labels add the value: "koord-prod (9,000)").
    classes = page.eval_on_selector_all(
        "select[name=priority_class] option", "options => options.map(o => o.value)"
    )
    assert "system-cluster-critical" not in classes and "koord-prod" in classes
    response = page.goto("/import/")
    assert response.status == 403
    expect(page.locator("nav.pages a", has_text="Jobs")).to_be_visible()
    expect(page.locator("h1")).to_have_text("Not allowed")
    assert not watch.blocked
