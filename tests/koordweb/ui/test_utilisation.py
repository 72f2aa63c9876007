"""Issue 37 item 2 and the topology part of item 6: use beside allocation. Node CPU and memory
use (NodeMetric) against the engine's load-aware thresholds on the overview, topology, devices
and nodes pages; the nodes page's filters and paging; the topology table saying what its
percent and free amount are of (NPUs in an Ascend block); the jobs page naming an NPU job's
idle cards."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.urls import reverse
from django.utils import timezone

from koordweb.models import Cluster, Job, JobGpuState, JobState, Node, NodeMetric
from tests import builders as f
from tests.builders import Pages

GIB = 1024**3


def report(node: Node, *, cpu_pct: int, memory_pct: int = 20) -> None:
    allocatable = node.allocatable
    NodeMetric.objects.create(
        node=node,
        reported_at=timezone.now(),
        usage={
            "cpu": allocatable["cpu"] * cpu_pct // 100,
            "memory": allocatable["memory"] * memory_pct // 100,
        },
    )


def busy_world(ui: Pages) -> None:
    """Three of the five nodes report CPU use of 80%, above Koordinator's default 65%."""
    for node in Node.objects.filter(cluster=ui.cluster).order_by("name"):
        report(node, cpu_pct=80 if node.name in ("node-1", "node-2", "node-4") else 30)


def test_the_overview_says_how_many_nodes_are_too_busy_for_the_load_aware_filter(
    ui: Pages, as_admin: Client
) -> None:
    busy_world(ui)
    html = as_admin.get(reverse("overview")).content.decode()
    assert "data-node-usage" in html
    assert "load-aware threshold 65%" in html  # the engine's default, read from the plugin
    assert '<strong class="alert" data-above="cpu">3 nodes with CPU use above it</strong>' in html
    assert 'id="fig-node-usage-overview"' in html


def test_the_thresholds_are_the_clusters_plugin_arguments(ui: Pages, as_admin: Client) -> None:
    busy_world(ui)
    Cluster.objects.filter(id=ui.cluster.id).update(
        scheduler_args={"LoadAware": {"usageThresholds": {"cpu": 85, "memory": 90}}}
    )
    html = as_admin.get(reverse("topology")).content.decode()
    assert "load-aware threshold 85%" in html and "no node above it" in html


def test_topology_and_devices_show_node_use_and_card_use(ui: Pages, as_admin: Client) -> None:
    busy_world(ui)
    topology = as_admin.get(reverse("topology")).content.decode()
    block = topology[topology.index('data-domain="b1"') :].split("</tr>")[0]
    assert "<td>80%</td>" in block and block.endswith("<td>2</td>")  # 2 nodes above
    devices = as_admin.get(reverse("devices")).content.decode()
    assert "data-node-usage" in devices and "data-cards-busy" in devices
    assert "3 nodes with CPU use above it" in devices


def test_an_npu_domain_says_its_allocation_is_of_npus_and_counts_its_free_npus(
    ui: Pages, as_admin: Client
) -> None:
    html = as_admin.get(reverse("topology")).content.decode()
    block = html[html.index('data-domain="b3"') :].split("</tr>")[0]  # node-4: 8 Ascend NPUs
    assert "% of NPUs</td>" in block and "<td>8 NPUs</td>" in block
    nvidia = html[html.index('data-domain="b1"') :].split("</tr>")[0]
    assert "% of GPUs</td>" in nvidia


def test_the_nodes_page_filters_by_state_device_and_domain_and_pages(
    ui: Pages, as_admin: Client
) -> None:
    busy_world(ui)
    Node.objects.filter(name="node-5").update(
        unschedulable=True,
        taints=[{"key": "maintenance", "value": "disk", "effect": "NoSchedule"}],
    )
    page = as_admin.get(reverse("nodes")).content.decode()
    assert 'data-count="nodes">5<' in page and "maintenance=disk:NoSchedule" in page
    assert "<strong>cordoned</strong>" in page and "train-a" in page
    busy = as_admin.get(reverse("nodes"), {"state": "busy"}).content.decode()
    assert 'data-count="nodes">3<' in busy and 'data-node="node-3"' not in busy
    assert "CPU use above the load-aware threshold" in busy
    npu = as_admin.get(reverse("nodes"), {"device": "npu"}).content.decode()
    assert 'data-count="nodes">1<' in npu and 'data-node="node-4"' in npu
    block = as_admin.get(reverse("nodes"), {"domain": "b1"}).content.decode()
    assert 'data-count="nodes">2<' in block
    cordoned = as_admin.get(reverse("nodes"), {"state": "cordoned"}).content.decode()
    assert 'data-count="nodes">1<' in cordoned and 'data-node="node-5"' in cordoned
    for index in range(60):
        f.NodeFactory(cluster=ui.cluster, name=f"cpu-{index:02}")
    second = as_admin.get(reverse("nodes"), {"page": 2}).content.decode()
    assert "page 2 of 2" in second and second.count("<tr data-node=") == 15
    assert reverse("nodes") in as_admin.get(reverse("overview")).content.decode()


def test_a_tenant_sees_only_its_own_pods_on_the_nodes_page(ui: Pages, as_bob: Client) -> None:
    page = as_bob.get(reverse("nodes")).content.decode()
    assert "train-a" not in page and "notebook-b" in page


def test_an_idle_npu_job_is_flagged_with_npus_not_gpus(ui: Pages, as_admin: Client) -> None:
    node = Node.objects.get(name="node-4")
    job = f.gang(
        ui.cluster,
        "ascend-train",
        quota=ui.running.quota,
        requests={"cpu": 4000, "huawei.com/npu": 8},
        nodes=[node],
        annotations=f.card_allocation({m: 100 for m in range(8)}),
    )
    Job.objects.filter(id=job.id).update(state=JobState.RUNNING)
    JobGpuState.objects.create(
        job=job, idle_since=timezone.now() - timedelta(hours=3), idle_allocated=8 * 100 * 10800
    )
    html = as_admin.get(reverse("jobs")).content.decode()
    assert "NPUs idle for 3 h" in html and "GPUs idle for 3 h" not in html
