"""Issue #37's "What to build", item by item, in Chromium, as admin and as tenant: use beside
allocation, the nodes page and its cordon, the overview's tiles into the jobs table, quotas,
preemption outcomes on the job page, rounds numbered per cluster, NPU words, short pages at 1,000
nodes, the submit form and the API docs' navigation. `test_workbench_browser.py` covers the jobs
table's filters and sorts, the quota edit form and the preemptions page's paging already.

Every test reads what the browser shows (text, links, the charts' drawn data) and fails on the
code before the item.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page

from benchmarks.e2e_scale import build_cluster
from koordweb.models import (
    Cluster,
    Device,
    ElasticQuota,
    Job,
    JobState,
    Node,
    NodeMetric,
    Preemption,
    PriorityClass,
    Round,
)
from koordweb.tasks import run_round
from tests.builders import (
    ClusterFactory,
    NodeFactory,
    PreemptionFactory,
    RoundFactory,
    card_allocation,
    gang,
    gpu_node,
)
from tests.builders import VictimFactory as Victim
from tests.e2e.browser import Watch, drawn_charts
from tests.e2e.demo_data import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
Outcome = Preemption.Outcome


def log_in(page: Page, username: str) -> None:
    """Log in as `username`, out of whoever was logged in (their session cookie dropped)."""
    page.context.clear_cookies()
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert "/login/" not in page.url, f"could not log in as {username}"


def go(page: Page, url: str) -> str:
    """Open a page and return the text a person reads on it."""
    response = page.goto(url)
    assert response is not None and response.status == 200, (url, response and response.status)
    return page.inner_text("main") if page.locator("main").count() else page.inner_text("body")


def figure_traces(page: Page, figure: str) -> list[dict]:
    """The drawn traces of a chart: name, x and y as plotly holds them."""
    drawn_charts(page, 1)
    return page.evaluate(
        "id => document.querySelector(`[data-figure='${id}']`).data"
        ".map(t => ({name: t.name, x: Array.from(t.x || []), y: Array.from(t.y || [])}))",
        figure,
    )


def submit(page: Page, selector: str) -> None:
    with page.expect_navigation():
        page.click(selector)


def number(text: str) -> float:
    found = re.search(r"-?[\d,]*\.?\d+", text)
    assert found, text
    return float(found[0].replace(",", ""))


# 1. Allocation and use side by side.


def _report_node_use(cluster: Cluster, busy: int) -> None:
    """koordlet's NodeMetric for every node: the first `busy` at 80% CPU, the rest at 20%."""
    for i, node in enumerate(Node.objects.filter(cluster=cluster).order_by("name")):
        pct = 80 if i < busy else 20
        NodeMetric.objects.create(
            node=node,
            reported_at=timezone.now(),
            usage={
                "cpu": node.allocatable["cpu"] * pct // 100,
                "memory": node.allocatable["memory"] // 5,
            },
        )


def test_1_use_beside_allocation(page: Page, watch: Watch, demo: Cluster) -> None:
    _report_node_use(demo, busy=5)
    log_in(page, "admin")
    go(page, "/")
    assert page.inner_text("[data-above=cpu]") == "5 nodes with CPU use above it"
    traces = {t["name"]: t for t in figure_traces(page, "fig-node-usage-overview")}
    assert traces["load-aware threshold"]["x"][0] == 65  # the engine's default, drawn
    text = go(page, "/topology/")
    assert "load-aware threshold 65%" in text and "5 nodes with CPU use above it" in text
    # Each block's row counts its nodes above the threshold (the table's last column).
    busy: dict[str, int] = {}
    for node in Node.objects.filter(cluster=demo).order_by("name")[:5]:
        block = node.labels["network.topology.nvidia.com/block"]
        busy[block] = busy.get(block, 0) + 1
    for block, count in busy.items():
        assert page.inner_text(f"tr[data-domain='{block}'] td:last-child").strip() == str(count)
    text = go(page, "/devices/")
    assert "5 nodes with CPU use above it" in text and page.locator("[data-cards-busy]").count()
    # GPU-hours: used, idle and underused stacked, adding up to each team's allocation.
    go(page, "/efficiency/")
    bars = {t["name"]: t for t in figure_traces(page, "fig-teams")}
    assert set(bars) == {"used", "allocated but idle", "allocated, busy but underused"}
    allocated = {
        row[0]: number(row[1])
        for row in page.eval_on_selector_all(
            "tr[data-team]", "rows => rows.map(r => [r.dataset.team, r.cells[1].innerText])"
        )
    }
    assert allocated
    stacked: dict[str, float] = {}
    for trace in bars.values():
        for team, amount in zip(trace["y"], trace["x"], strict=True):
            stacked[team] = stacked.get(team, 0.0) + amount
    for team, total in allocated.items():
        assert stacked[team] == pytest.approx(total, abs=0.1), team
    # A tenant reads the cluster's node use and only its own teams' GPU-hours.
    log_in(page, "alice")
    go(page, "/")
    assert page.inner_text("[data-above=cpu]") == "5 nodes with CPU use above it"
    go(page, "/efficiency/")
    teams = page.eval_on_selector_all("tr[data-team]", "rows => rows.map(r => r.dataset.team)")
    assert teams == ["team-vision"]
    watch.assert_clean()


# 2. The nodes page: filters, and cordon / uncordon as an admin's action.


def test_2_nodes_page_filters_and_cordons(
    page: Page, watch: Watch, demo: Cluster, screenshots: Path
) -> None:
    npus = list(
        Node.objects.filter(cluster=demo, devices__vendor="huawei")
        .distinct()
        .order_by("name")
        .values_list("name", flat=True)
    )
    assert npus
    log_in(page, "admin")
    go(page, "/nodes/")
    page.select_option("select[name=device]", "npu")
    submit(page, "form.filters button[type=submit]")
    assert page.inner_text("[data-count=nodes]") == str(len(npus))
    shown = page.eval_on_selector_all("tr[data-node]", "rows => rows.map(r => r.dataset.node)")
    assert shown == npus
    target = npus[0]
    row = f"tr[data-node='{target}']"
    submit(page, f"{row} button[value=cordon]")
    assert "device=npu" in page.url  # back to the page as it was filtered
    assert f"Cordoned node {target}" in page.inner_text(".messages")
    assert "cordoned" in page.inner_text(f"{row} td[data-health]")
    assert page.inner_text(f"{row} [data-record]").startswith("Cordoned (admin, ")
    assert Node.objects.get(cluster=demo, name=target).unschedulable
    page.screenshot(path=str(screenshots / "nodes-cordon.png"), full_page=False)
    page.select_option("select[name=device]", "")
    page.select_option("select[name=state]", "cordoned")
    submit(page, "form.filters button[type=submit]")
    assert page.inner_text("[data-count=nodes]") == "1"
    submit(page, f"{row} button[value=uncordon]")
    assert f"Uncordoned node {target}" in page.inner_text(".messages")
    assert page.inner_text("[data-count=nodes]") == "0"
    assert not Node.objects.get(cluster=demo, name=target).unschedulable
    # A tenant sees the nodes, never the action.
    log_in(page, "alice")
    go(page, "/nodes/")
    assert page.locator("tr[data-node]").count() > 0
    assert page.locator("form.cordon, button[name=action]").count() == 0
    watch.assert_clean()


# 3. The overview's tiles open the jobs table filtered.


def _tile_opens_its_jobs(page: Page, tile: str, states: set[str]) -> None:
    go(page, "/")
    count = int(page.inner_text(f"[data-count={tile}]"))
    submit(page, f"a.count.{tile}")
    assert int(page.inner_text("[data-count=jobs]")) == count
    shown = set(page.locator("tr[data-job] span.state").all_inner_texts())
    assert shown <= states and (shown or count == 0)


def test_3_overview_tiles_link_to_the_filtered_table(
    page: Page, watch: Watch, demo: Cluster
) -> None:
    assert Job.objects.filter(cluster=demo, state=JobState.PREEMPTED).exists()
    log_in(page, "admin")
    _tile_opens_its_jobs(page, "preempted", {"Preempted", "Preempting"})
    _tile_opens_its_jobs(page, "running", {"Running", "Scheduled"})
    _tile_opens_its_jobs(page, "pending", {"Pending"})
    log_in(page, "alice")  # a tenant's tiles count, and open, its own jobs
    _tile_opens_its_jobs(page, "running", {"Running", "Scheduled"})
    shown = set(page.eval_on_selector_all("tr[data-job]", "rows => rows.map(r => r.dataset.job)"))
    mine = Job.objects.filter(cluster=demo, quota__name="team-vision")
    assert shown and shown <= set(mine.values_list("name", flat=True))
    watch.assert_clean()


# 4. Quotas an admin manages; a tenant reads them.


def test_4_quotas_headroom_and_who_may_edit(page: Page, watch: Watch, demo: Cluster) -> None:
    log_in(page, "admin")
    go(page, "/quotas/")
    rows = page.eval_on_selector_all(
        "tr[data-quota][data-resource='nvidia.com/gpu']",
        "rows => rows.map(r => [r.dataset.quota, r.querySelector('td strong').innerText,"
        " r.querySelector('td.may-use').innerText])",
    )
    assert rows
    # "May use now" is the headroom: above "used" wherever the cluster has free GPUs for it.
    assert any(number(may) > number(used) for _, used, may in rows), rows
    assert page.locator("a[href$='/edit/']").count() >= 3
    log_in(page, "alice")
    go(page, "/quotas/")
    assert page.locator("a[href$='/edit/']").count() == 0
    assert page.locator("td.may-use").count() > 0
    quota = ElasticQuota.objects.get(cluster=demo, name="team-vision")
    response = page.goto(f"/quotas/{quota.name}/edit/")
    assert response is not None and response.status == 404
    assert page.locator("nav.pages a[href='/jobs/']").count()  # the refusal keeps the navigation
    # The 404 asked for is the one error the browser logs here.
    watch.errors.remove(
        "Failed to load resource: the server responded with a status of 404 (Not Found)"
    )
    watch.assert_clean()


# 5. Preemption outcomes on the job page.


def test_5_job_page_lists_its_preemptions_and_outcomes(
    page: Page, watch: Watch, demo: Cluster, screenshots: Path
) -> None:
    preemptor = Job.objects.get(cluster=demo, name="vit-pretrain")  # team-vision (alice)
    victim = Job.objects.get(cluster=demo, name="llm-sft")  # team-nlp (bob)
    node = preemptor.pods.exclude(node=None).order_by("name").first().node.name
    at = timezone.now() - timedelta(minutes=30)
    first = PreemptionFactory(
        cluster=demo,
        preemptor=preemptor,
        attempt=1,
        nominations={"team-vision/vit-pretrain-0": node},
        created_at=at,
        outcome=Outcome.PREEMPTED_AGAIN,
        outcome_reason="2 of its victims' pods had not left; it preempted anew.",
        outcome_at=at + timedelta(minutes=1),
    )
    Victim(preemption=first, job=victim, pods=["team-nlp/llm-sft-0", "team-nlp/llm-sft-1"])
    second = PreemptionFactory(
        cluster=demo,
        preemptor=preemptor,
        attempt=2,
        nominations={"team-vision/vit-pretrain-0": node},
        created_at=at + timedelta(minutes=1),
        outcome=Outcome.STARTED,
        outcome_reason="All 8 pods started on their nominated nodes.",
        outcome_at=at + timedelta(minutes=2),
    )
    Victim(preemption=second, job=victim, pods=["team-nlp/llm-sft-2"])
    log_in(page, "admin")
    go(page, f"/jobs/{preemptor.pk}/")
    page.locator("section.preemption-history").screenshot(
        path=str(screenshots / "job-preemption-history.png")
    )
    outcomes = page.eval_on_selector_all(
        "[data-preemptions-made] tr[data-preemption]",
        "rows => rows.map(r => [r.dataset.preemption, r.querySelector('td.outcome').innerText])",
    )
    tail = outcomes[-2:]
    assert [pk for pk, _ in tail] == [str(first.pk), str(second.pk)]
    assert tail[0][1].startswith("Preempted again at") and "had not left" in tail[0][1]
    assert tail[1][1].startswith("Started on its nominated nodes at")
    history = page.inner_text("[data-preemptions-made]")
    assert "team-nlp/llm-sft" in history and node in history
    submit(page, f"tr[data-preemption='{first.pk}'] td.outcome a")  # to the next attempt
    assert page.url.endswith(f"/preemptions/{second.pk}/")
    go(page, f"/jobs/{victim.pk}/")
    assert "Preempted by team-vision/vit-pretrain at" in page.inner_text(
        "[data-preemptions-suffered]"
    )
    # bob, whose job was the victim, reads the preemptor unnamed.
    bob = demo.quotas.get(name="team-nlp").members.get()
    bob.set_password(PASSWORD)
    bob.save()
    log_in(page, bob.username)
    go(page, f"/jobs/{victim.pk}/")
    suffered = page.inner_text("[data-preemptions-suffered]")
    assert "Preempted by another team's job at" in suffered and "vit-pretrain" not in suffered
    watch.assert_clean()


# 6. Numbers that agree: rounds numbered per cluster.


def test_6_rounds_are_numbered_per_cluster(page: Page, watch: Watch, demo: Cluster) -> None:
    other = ClusterFactory(name="other")
    NodeFactory(cluster=other, name="o-1")
    seeded = Round.objects.filter(cluster=demo, number__isnull=False).count()  # the demo's history
    for cluster in (demo, other, demo, other, demo):
        run_round(cluster.id)
    log_in(page, "admin")
    for cluster, count in ((demo, seeded + 3), (other, 2)):
        go(page, f"/rounds/?cluster={cluster.name}")
        real = Round.objects.filter(cluster=cluster, number__isnull=False).order_by("number")
        assert [r.number for r in real] == list(range(1, count + 1))
        # Each real round reads its number in its own cluster, never its id (shared by both).
        shown = [page.inner_text(f"a[href='/rounds/{r.pk}/']") for r in real]
        assert shown == [f"#{n}" for n in range(1, count + 1)]
        assert [r.pk for r in real] != list(range(real[0].pk, real[0].pk + count))
    # The round page: still waiting after it = waiting when it began - placed.
    first = Round.objects.get(cluster=demo, number=seeded + 1)
    text = go(page, f"/rounds/{first.pk}/?cluster={demo.name}")
    assert f"Round #{seeded + 1} " in text
    found = re.search(
        r"([\d,]+) pods? waiting when it began, ([\d,]+) pods? placed, "
        r"([\d,]+) pods? still waiting after it",
        text,
    )
    assert found, text[:2000]
    waiting, placed, left = (number(found[i]) for i in (1, 2, 3))
    assert left == waiting - placed and placed > 0
    log_in(page, "alice")
    go(page, f"/rounds/?cluster={other.name}")
    assert sorted(page.locator("table tbody td:first-child a").all_inner_texts()) == ["#1", "#2"]
    watch.assert_clean()


# 7. Words for every device kind.


def _ascend_and_cambricon(demo: Cluster) -> Node:
    """A block of whole-card Ascend NPUs and one of Cambricon MLUs, beside the demo's (whose
    nodes advertise NPU cores and MLU shares, not whole cards)."""
    gpu_node(
        demo,
        "mlu-x1",
        spine="s3",
        block="b12",
        vendor="cambricon",
        model="MLU370",
        resource="cambricon.com/mlu",
    )
    return gpu_node(
        demo,
        "ascend-x1",
        spine="s3",
        block="b11",
        vendor="huawei",
        model="910B3",
        resource="huawei.com/npu",
    )


def test_7_npu_jobs_are_said_in_npu_words(page: Page, watch: Watch, demo: Cluster) -> None:
    ascend = _ascend_and_cambricon(demo)
    quota = ElasticQuota.objects.get(cluster=demo, name="team-vision")
    job = gang(
        demo,
        "ascend-train",
        quota=quota,
        replicas=1,
        requests={"cpu": 8000, "huawei.com/npu": 4, "koordinator.sh/gpu-core": 400},
        nodes=[ascend],
        annotations=card_allocation(dict.fromkeys(range(4), 100)),
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=timezone.now())
    for user in ("admin", "alice"):
        log_in(page, user)
        go(page, "/jobs/?q=ascend-train")
        cards = page.inner_text("tr[data-job='ascend-train'] td.cards")
        assert cards == "4 NPUs"
        text = go(page, f"/jobs/{job.pk}/")
        assert "4 NPUs" in text and "GPU" not in page.inner_text("dl.facts")
    # The topology table says what an Ascend block's share is of, and counts its free NPUs.
    text = go(page, "/topology/")
    row = page.inner_text("tr[data-domain='b11']")
    assert "% of NPUs" in row and "GPU" not in row and "4 NPUs" in row  # 4 of 8 free
    watch.assert_clean()


# 8. Pages that stay short at 1,000 nodes.


def test_8_pages_stay_short_at_1000_nodes(page: Page, watch: Watch, demo: Cluster) -> None:
    scale = build_cluster("scale-1000", 1000, pending_pods=200)
    Device.objects.bulk_create(
        Device(node=node, device_type="gpu", vendor="nvidia", model="H100", minor=m)
        for node in Node.objects.filter(cluster=scale)
        for m in range(8)
    )
    run_round(scale.id)
    now = timezone.now()
    for i in range(60):
        RoundFactory(cluster=scale, number=100 + i, started_at=now - timedelta(minutes=i + 1))
    preemptor = Job.objects.filter(cluster=scale, state=JobState.RUNNING).first()
    for i in range(25):
        item = PreemptionFactory(
            cluster=scale, preemptor=preemptor, created_at=now - timedelta(minutes=i)
        )
        for victim in Job.objects.filter(cluster=scale, name__in=[f"busy-{i}", f"busy-{i + 25}"]):
            Victim(preemption=item, job=victim, pods=[f"batch/{victim.name}-0"])
    log_in(page, "admin")
    text = go(page, "/devices/?cluster=scale-1000")
    assert page.inner_text("[data-count=cards]") == "8000"
    assert "of 1000 nodes matching the filters (page 1 of 9)" in text
    assert page.evaluate("document.documentElement.scrollHeight") < 6000
    page.select_option("select[name=block]", "block-3")
    submit(page, "form.filters button[type=submit]")
    assert "128 cards on 16 of 16 nodes matching the filters" in page.inner_text("main")
    text = go(page, "/nodes/?domain=block-3")
    assert page.inner_text("[data-count=nodes]") == "16"
    go(page, "/nodes/")
    assert page.locator("tr[data-node]").count() == 50
    assert "page 1 of 20" in page.inner_text("nav.pager")
    go(page, "/rounds/")
    assert page.locator("table tbody tr").count() == 50
    submit(page, "nav.pager a")
    assert "page=2" in page.url and page.locator("table tbody tr").count() == 11
    go(page, "/preemptions/")
    assert page.inner_text("[data-count=preemptions]") == "25"
    assert page.locator("table.compact tbody tr").count() == 20
    assert page.evaluate("document.documentElement.scrollHeight") < 4000
    # A tenant with no team on this cluster: the cluster's cards, none of its preemptions.
    log_in(page, "alice")
    go(page, "/devices/?cluster=scale-1000")
    assert page.inner_text("[data-count=cards]") == "8000"
    go(page, "/preemptions/")
    assert page.inner_text("[data-count=preemptions]") == "0"
    watch.assert_clean()


# 9. The submit form and the API docs.


def test_9_submit_form_and_api_docs(page: Page, watch: Watch, demo: Cluster) -> None:
    PriorityClass.objects.create(cluster=demo, name="system-cluster-critical", value=2_000_000_000)
    _ascend_and_cambricon(demo)
    kinds = {"gpu", "gpu-share", "npu", "mlu"}
    for user, system in (("admin", True), ("alice", False)):
        log_in(page, user)
        go(page, "/jobs/submit/")
        offered = set(
            page.eval_on_selector_all("select[name=device] option", "os => os.map(o => o.value)")
        )
        assert offered - {""} == kinds, offered
        classes = page.eval_on_selector_all(
            "select[name=priority_class] option", "os => os.map(o => [o.value, o.innerText])"
        )
        names = {value for value, _ in classes if value}
        assert ("system-cluster-critical" in names) is system
        assert {"koord-batch", "koord-free"} <= names
        assert all(re.search(r"\d", label) for value, label in classes if value)  # values shown
        page.select_option("select[name=device]", "npu")
        assert "Ascend NPU" in page.inner_text("select[name=device]")
    # The API docs keep the app's navigation: a click goes back to the jobs.
    go(page, "/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    submit(page, "nav.pages a[href='/jobs/']")
    assert page.url.endswith("/jobs/") and page.locator("[data-count=jobs]").count() == 1
    watch.assert_clean()
