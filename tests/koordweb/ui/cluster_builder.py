"""A small cluster in ORM rows that exercises every page: topology with a node outside it,
NVIDIA and Ascend cards with whole and shared allocations, two tenants, a queue, rounds (one
failed), an enacted and a blocked preemption."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

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
    TopologyLayer,
)

SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
GIB = 1024**3
PASSWORD = "a-long-test-password-1"


@dataclass
class UiCluster:
    cluster: Cluster
    admin: Any
    alice: Any  # member of team-a
    bob: Any  # member of team-b
    running: Job  # team-a, 2 pods x 8 GPUs on node-1 and node-2
    shared: Job  # team-b, one pod with half of card 0 of node-3
    pending: Job  # team-b, unschedulable
    preempted: Job  # team-b, evicted by `running`
    failed_round: Round
    good_round: Round
    preemption: Preemption
    blocked: Preemption


def _allocated(minors: list[int], core: int = 100) -> str:
    cards = [{"minor": m, "resources": {"koordinator.sh/gpu-core": core}} for m in minors]
    return json.dumps({"gpu": cards})


def build_ui_cluster() -> UiCluster:
    now = timezone.now()
    users = get_user_model().objects
    admin = users.create_user("admin", password=PASSWORD, is_staff=True, is_superuser=True)
    alice = users.create_user("alice", password=PASSWORD)
    bob = users.create_user("bob", password=PASSWORD)
    cluster = Cluster.objects.create(name="default")
    for position, (name, parent, keys) in enumerate(
        [
            ("SpineLayer", "", [SPINE]),
            ("BlockLayer", "SpineLayer", [BLOCK]),
            ("NodeTopologyLayer", "BlockLayer", []),
        ]
    ):
        TopologyLayer.objects.create(
            cluster=cluster, name=name, parent_name=parent, label_keys=keys, position=position
        )
    layout = {
        "node-1": ("s1", "b1", "nvidia"),
        "node-2": ("s1", "b1", "nvidia"),
        "node-3": ("s1", "b2", "nvidia"),
        "node-4": ("s2", "b3", "huawei"),
        "node-5": ("", "b4", "nvidia"),  # no spine label: outside the topology
    }
    nodes: dict[str, Node] = {}
    for name, (spine, block, vendor) in layout.items():
        labels = {BLOCK: block, "node.koordinator.sh/gpu-vendor": vendor}
        if spine:
            labels[SPINE] = spine
        resource = "nvidia.com/gpu" if vendor == "nvidia" else "huawei.com/npu"
        nodes[name] = Node.objects.create(
            cluster=cluster,
            name=name,
            labels=labels,
            allocatable={"cpu": 64000, "memory": 512 * GIB, resource: 8, "pods": 110},
        )
        model = "H100" if vendor == "nvidia" else "910B3"
        Device.objects.bulk_create(
            Device(
                node=nodes[name],
                device_type=Device.Type.GPU,
                vendor=vendor,
                model=model,
                minor=minor,
                numa_node=minor // 4,
                pcie_id=f"pci{minor // 2}",
                health=not (name == "node-3" and minor == 7),
            )
            for minor in range(8)
        )
    prod = PriorityClass.objects.create(cluster=cluster, name="koord-prod", value=9000)
    batch = PriorityClass.objects.create(cluster=cluster, name="koord-batch", value=5000)
    root = ElasticQuota.objects.create(
        cluster=cluster,
        name="root",
        is_parent=True,
        min={"nvidia.com/gpu": 32},
        max={"nvidia.com/gpu": 40},
    )
    team_a = ElasticQuota.objects.create(
        cluster=cluster,
        name="team-a",
        parent=root,
        min={"nvidia.com/gpu": 16},
        max={"nvidia.com/gpu": 32},
    )
    team_b = ElasticQuota.objects.create(
        cluster=cluster,
        name="team-b",
        parent=root,
        min={"nvidia.com/gpu": 8},
        max={"nvidia.com/gpu": 24},
    )
    team_a.members.add(alice)
    team_b.members.add(bob)

    def job(
        name: str, quota: ElasticQuota, state: str, priority_class: PriorityClass, **extra: Any
    ) -> Job:
        return Job.objects.create(
            cluster=cluster,
            name=name,
            quota=quota,
            priority_class=priority_class,
            priority=priority_class.value,
            state=state,
            submitted_at=now - timedelta(hours=3),
            total_number=extra.pop("total_number", 1),
            min_available=extra.pop("min_available", 1),
            **extra,
        )

    running = job(
        "train-a",
        team_a,
        JobState.RUNNING,
        prod,
        total_number=2,
        min_available=2,
        started_at=now - timedelta(hours=1),
        topology_spec={"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]},
    )
    for index, node in enumerate(["node-1", "node-2"]):
        Pod.objects.create(
            cluster=cluster,
            job=running,
            name=f"train-a-{index}",
            node=nodes[node],
            phase=PodPhase.RUNNING,
            created_at=now,
            requests={"cpu": 32000, "memory": 128 * GIB, "nvidia.com/gpu": 8},
            annotations={"scheduling.koordinator.sh/device-allocated": _allocated(list(range(8)))},
        )
    shared = job("notebook-b", team_b, JobState.RUNNING, batch, started_at=now - timedelta(hours=2))
    Pod.objects.create(
        cluster=cluster,
        job=shared,
        name="notebook-b-0",
        node=nodes["node-3"],
        phase=PodPhase.RUNNING,
        created_at=now,
        requests={"cpu": 4000, "memory": 16 * GIB, "koordinator.sh/gpu-core": 50},
        annotations={"scheduling.koordinator.sh/device-allocated": _allocated([0], core=50)},
    )
    pending = job("big-b", team_b, JobState.PENDING, batch, total_number=4, min_available=4)
    for index in range(4):
        Pod.objects.create(
            cluster=cluster,
            job=pending,
            name=f"big-b-{index}",
            created_at=now,
            requests={"cpu": 8000, "nvidia.com/gpu": 8},
        )
    preempted = job("old-b", team_b, JobState.PREEMPTED, batch, started_at=now - timedelta(hours=5))
    good_round = Round.objects.create(
        cluster=cluster,
        state=Round.State.SUCCEEDED,
        started_at=now - timedelta(minutes=30),
        duration_ms=42,
        engine_ms=30,
        jobs_considered=3,
        jobs_placed=1,
        preemption_count=1,
    )
    failed_round = Round.objects.create(
        cluster=cluster,
        state=Round.State.FAILED,
        started_at=now - timedelta(minutes=10),
        duration_ms=5,
        error="snapshot failed: node-9 vanished",
    )
    Decision.objects.create(
        round=good_round,
        job=pending,
        outcome=Decision.Outcome.UNSCHEDULABLE,
        reason="no candidate topology nodes can accommodate job, desiredOfferSlot: 4",
        details={"counterfactual": "fits block b1 if train-a is preempted"},
        created_at=now - timedelta(minutes=30),
    )
    Decision.objects.create(
        round=good_round,
        job=running,
        outcome=Decision.Outcome.PLACED,
        reason="block b1",
        created_at=now - timedelta(minutes=30),
    )
    preemption = Preemption.objects.create(
        cluster=cluster,
        round=good_round,
        preemptor=running,
        state=Preemption.State.ENACTED,
        reason="train-a needs block b1",
        cost={"max_victim_priority": 5000, "jobs": 1},
        nominations={"train-a-0": "node-1"},
        created_at=now - timedelta(minutes=30),
    )
    PreemptionVictim.objects.create(
        preemption=preemption, job=preempted, pods=["default/old-b-0"], freed={"nvidia.com/gpu": 8}
    )
    blocked = Preemption.objects.create(
        cluster=cluster,
        preemptor=running,
        state=Preemption.State.BLOCKED,
        reason="a PodDisruptionBudget allows no disruption",
        created_at=now - timedelta(minutes=5),
    )
    return UiCluster(
        cluster,
        admin,
        alice,
        bob,
        running,
        shared,
        pending,
        preempted,
        failed_round,
        good_round,
        preemption,
        blocked,
    )
