"""At 5,000 nodes the pages aggregate and paginate: figure payloads stay small."""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from koordweb.models import Cluster, Device, Job, JobState, Node, Pod, PodPhase
from tests.builders import BLOCK, SPINE, ClusterFactory, topology
from tests.koordweb.ui.html import figures

NODES = 5000
NODES_PER_BLOCK = 16
BLOCKS_PER_SPINE = 16


def build_large_cluster() -> Cluster:
    cluster = ClusterFactory(name="default")
    topology(cluster)
    # Row by row, 5,000 nodes and their 40,000 cards would take minutes: in bulk.
    nodes = Node.objects.bulk_create(
        Node(
            cluster=cluster,
            name=f"node-{i:05d}",
            labels={
                SPINE: f"s{i // (NODES_PER_BLOCK * BLOCKS_PER_SPINE)}",
                BLOCK: f"b{i // NODES_PER_BLOCK}",
            },
            allocatable={"cpu": 128000, "memory": 2**40, "nvidia.com/gpu": 8},
        )
        for i in range(NODES)
    )
    Device.objects.bulk_create(
        Device(
            node=node, device_type="gpu", vendor="nvidia", model="H100", minor=m, numa_node=m // 4
        )
        for node in nodes
        for m in range(8)
    )
    now = timezone.now()
    job = Job.objects.create(
        cluster=cluster,
        name="big",
        state=JobState.RUNNING,
        submitted_at=now,
        total_number=NODES // 2,
        min_available=1,
    )
    allocated = json.dumps(
        {"gpu": [{"minor": m, "resources": {"koordinator.sh/gpu-core": 100}} for m in range(8)]}
    )
    Pod.objects.bulk_create(
        Pod(
            cluster=cluster,
            job=job,
            name=f"big-{i}",
            node=node,
            phase=PodPhase.RUNNING,
            created_at=now,
            requests={"nvidia.com/gpu": 8},
            annotations={"scheduling.koordinator.sh/device-allocated": allocated},
        )
        for i, node in enumerate(nodes[: NODES // 2])
    )
    return cluster


@pytest.mark.slow
@pytest.mark.django_db
def test_pages_stay_compact_at_5000_nodes(settings: object) -> None:
    build_large_cluster()
    admin = get_user_model().objects.create_user("root", is_staff=True)
    client = Client()
    client.force_login(admin)
    timings = {}
    sizes = {}
    for name in ("overview", "topology", "devices", "quotas", "jobs"):
        started = time.perf_counter()
        response = client.get(reverse(name))
        timings[name] = round(time.perf_counter() - started, 2)
        sizes[name] = len(response.content)
        assert response.status_code == 200
    print("seconds per page at 5,000 nodes:", timings, "bytes:", sizes)
    topology = figures(client.get(reverse("topology")).content.decode())
    ids = topology["fig-sunburst"]["data"][0]["ids"]
    # Aggregated to blocks: 313 blocks + 20 spines + the root, no node leaves.
    assert not any(i.startswith("NodeTopologyLayer/") for i in ids)
    assert len(ids) == 1 + 20 + 313
    assert sizes["topology"] < 600_000
    heat = figures(client.get(reverse("devices")).content.decode())["fig-heatmap"]["data"][0]
    assert len(heat["y"]) == 120  # one page of nodes
    assert sizes["devices"] < 800_000
    assert sizes["overview"] < 100_000
