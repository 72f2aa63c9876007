"""Defects found by looking at the regenerated screenshots (issue #37): quota errors in the form's
units, device kinds in their own words, the idle flag and card count of an NPU job, the job
page's preemption outcome and efficiency, and the devices page's idle, team and model filters.
Django's test client on `builders.pages_world`."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from koordweb.models import (
    CardSample,
    Cluster,
    ElasticQuota,
    Job,
    JobGpuState,
    Node,
    Preemption,
)
from tests.builders import Pages
from tests.builders.cluster import GIB
from tests.builders.devices import DEVICE_ALLOCATED, gpu_node
from tests.builders.jobs import gang
from tests.builders.rounds import PreemptionFactory
from tests.koordweb.ui.html import figures

NPU_CORE = "huawei.com/npu-core"
GPU_CORE = "koordinator.sh/gpu-core"


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _ascend_and_cambricon(ui: Pages) -> tuple[Node, Node, Job]:
    """As the demo has them: an Ascend node reporting its cards only as AI cores and a
    Cambricon node reporting only GPU-core shares (spine s3, blocks b9 and b10), and a notebook
    of team-b holding card 0 of the Ascend node in AI cores, idle for five hours."""
    nodes = []
    for name, block, vendor, model, shares in (
        ("node-npu", "b9", "huawei", "910B3", {NPU_CORE: 160, GPU_CORE: 800}),
        ("node-mlu", "b10", "cambricon", "MLU370", {GPU_CORE: 800}),
    ):
        node = gpu_node(
            ui.cluster, name, spine="s3", block=block, vendor=vendor, model=model, resource="x/y"
        )
        node.allocatable = {"cpu": 64000, "memory": 512 * GIB, "pods": 110, **shares}
        node.save(update_fields=["allocatable"])
        nodes.append(node)
    allocated = {"gpu": [{"minor": 0, "resources": {NPU_CORE: 20, GPU_CORE: 100}}]}
    team_b = ElasticQuota.objects.get(cluster=ui.cluster, name="team-b")
    now = timezone.now()
    notebook = gang(
        ui.cluster,
        "npu-notebook",
        quota=team_b,
        requests={"cpu": 4000, "memory": 32 * GIB, NPU_CORE: 20},
        nodes=[nodes[0]],
        annotations={DEVICE_ALLOCATED: json.dumps(allocated)},
        started_at=now - timedelta(hours=5),
    )
    JobGpuState.objects.create(
        job=notebook, idle_since=now - timedelta(hours=5), idle_allocated=5 * 3600 * 100
    )
    # The last sampled minute: the notebook held its card idle.
    step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
    until = int(now.timestamp()) // step * step
    Cluster.objects.filter(pk=ui.cluster.pk).update(gpu_sampled_until=until)
    ui.cluster.gpu_sampled_until = until
    CardSample.objects.create(
        period_start=until - step,
        period_seconds=step,
        node=nodes[0],
        minor=0,
        job=notebook,
        quota=team_b,
        allocated=100 * step,
        idle_allocated=100 * step,
    )
    return nodes[0], nodes[1], notebook


def _domain_row(html: str, name: str) -> str:
    row = re.search(rf'<tr data-domain="{name}">(.*?)</tr>', html, re.S)
    assert row, name
    return _text(row.group(1))


# 1. Quota edit: errors and values in the form's units.


def test_quota_edit_says_min_above_max_in_units_and_shows_plain_amounts(
    ui: Pages, as_admin: Client
) -> None:
    quota = ElasticQuota.objects.get(cluster=ui.cluster, name="team-a")
    quota.min = {"cpu": 4_000_000, "memory": 512 * GIB, "nvidia.com/gpu": 16}
    quota.max = {"cpu": 10_000_000, "memory": 600 * GIB, "nvidia.com/gpu": 32}
    quota.save()
    url = reverse("quota-edit", args=["team-a"])
    shown = as_admin.get(url).content.decode()
    assert 'value="4000"' in shown and 'value="600"' in shown
    assert "4000.0" not in shown and "600.0" not in shown
    form = dict(re.findall(r'name="(\w+)" value="([^"]*)"', shown))
    form["min_1"] = "700"  # memory: above its max of 600 GiB
    answer = _text(as_admin.post(url, form).content.decode())
    assert "Guaranteed memory (700 GiB) is above the maximum (600 GiB)." in answer
    assert "751619276800" not in answer and "min: memory" not in answer
    quota.refresh_from_db()
    assert quota.min["memory"] == 512 * GIB


# 3. Topology: each device kind in its own words and units.


def test_topology_names_npu_and_mlu_blocks_by_their_cards(ui: Pages, as_admin: Client) -> None:
    _ascend_and_cambricon(ui)
    html = as_admin.get(reverse("topology"), {"resource": "nvidia.com/gpu", "count": 8}).content
    page = html.decode()
    npu, mlu, spine = (_domain_row(page, n) for n in ("b9", "b10", "s3"))
    assert "12.5% of NPUs" in npu and "7 NPUs" in npu, npu
    assert "0.0% of MLUs" in mlu and "8 MLUs" in mlu, mlu
    assert "of MLUs and NPUs" in spine and "8 MLUs, 7 NPUs" in spine, spine
    for row in (npu, mlu, spine):
        assert "GPU core" not in row and "AI cores" not in row, row


# 4. Jobs table: an NPU job's idle flag and cards.


def test_jobs_table_names_an_npu_jobs_idle_cards_and_counts_them(
    ui: Pages, as_admin: Client
) -> None:
    _, _, notebook = _ascend_and_cambricon(ui)
    html = as_admin.get(reverse("jobs"), {"state": "all"}).content.decode()
    row = re.search(rf'<tr data-job="{notebook.name}">(.*?)</tr>', html, re.S)
    assert row
    text = _text(row.group(1))
    assert "NPUs idle for 5 h" in text and "GPUs idle" not in text, text
    cards = re.search(r'<td class="cards">(.*?)</td>', row.group(1), re.S)
    assert cards and _text(cards.group(1)).strip() == "NPU share, 20 AI cores", cards


# 5. Job detail: the preemption's outcome without nominations, efficiency without samples.


def test_job_page_says_outcome_without_unrecorded_nominations_and_no_usage_yet(
    ui: Pages, as_admin: Client
) -> None:
    now = timezone.now()
    ui.preemption.outcome = Preemption.Outcome.STARTED  # nominated node-1, and started there
    ui.preemption.save(update_fields=["outcome"])
    PreemptionFactory(
        round=ui.good_round,
        preemptor=ui.running,
        state=Preemption.State.ENACTED,
        reason="train-a needs block b1",
        cost={"jobs": 1},
        nominations={},
        created_at=now - timedelta(minutes=20),
        outcome=Preemption.Outcome.STARTED,
        outcome_at=now - timedelta(minutes=19),
    )
    html = as_admin.get(reverse("job-detail", args=[ui.running.pk])).content.decode()
    rows = re.findall(r'<tr data-preemption="\d+" data-outcome="started">(.*?)</tr>', html, re.S)
    texts = [_text(row) for row in rows]
    unrecorded = [t for t in texts if "not recorded" in t or "none recorded" in t]
    assert unrecorded, texts
    assert all("nominated nodes at" not in t for t in unrecorded), unrecorded
    assert any("node-1" in t and "Started on its nominated nodes" in t for t in texts), texts
    page = _text(html)
    assert "0% efficiency" not in page
    assert "No usage reported yet" in page


# 7. Devices page: idle, team and model filters with counts.


def _heatmap_rows(html: str) -> list[str]:
    figure = figures(html).get("fig-heatmap")
    return [] if figure is None else [row.split(" · ")[-1] for row in figure["data"][0]["y"]]


def _choice(html: str, name: str, value: str) -> str:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S)
    assert select, name
    option = re.search(rf'<option value="{re.escape(value)}"[^>]*>(.*?)</option>', select.group(1))
    assert option, (name, value, select.group(1))
    return option.group(1)


def test_devices_filter_idle_team_and_model_cards_with_counts(ui: Pages, as_admin: Client) -> None:
    _ascend_and_cambricon(ui)
    devices = reverse("devices")
    everything = as_admin.get(devices).content.decode()
    assert _choice(everything, "show", "idle") == "allocated but idle (1 card)"
    assert _choice(everything, "team", "team-a") == "team-a (16 cards)"
    assert _choice(everything, "model", "MLU370") == "Cambricon MLU370 (8 cards)"
    idle = as_admin.get(devices, {"show": "idle"}).content.decode()
    assert _heatmap_rows(idle) == ["node-npu"]
    assert "Shown: 1 card on 1 of 1 node" in _text(idle)
    team = as_admin.get(devices, {"team": "team-a"}).content.decode()
    assert _heatmap_rows(team) == ["node-1", "node-2"]
    # counts follow the other filters: team-a holds no idle card
    assert _choice(team, "show", "idle") == "allocated but idle (0 cards)"
    model = as_admin.get(devices, {"model": "MLU370"}).content.decode()
    assert _heatmap_rows(model) == ["node-mlu"]
    assert as_admin.get(devices, {"model": "MLU370", "show": "allocated"}).status_code == 200
    assert (
        _heatmap_rows(
            as_admin.get(devices, {"model": "MLU370", "show": "allocated"}).content.decode()
        )
        == []
    )


def test_a_tenant_filters_devices_by_its_own_teams_only(ui: Pages, as_alice: Client) -> None:
    _ascend_and_cambricon(ui)
    html = as_alice.get(reverse("devices")).content.decode()
    select = re.search(r'<select name="team"[^>]*>(.*?)</select>', html, re.S)
    assert select and "team-a" in select.group(1) and "team-b" not in select.group(1)
