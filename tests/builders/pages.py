"""The HTML pages' world: `teams()` on five nodes with work in every state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from koordweb import models
from koordweb.models import JobState
from tests.builders.cluster import GIB
from tests.builders.devices import card_allocation, whole_cards
from tests.builders.jobs import JobFactory, gang
from tests.builders.rounds import DecisionFactory, PreemptionFactory, RoundFactory, VictimFactory
from tests.builders.teams import teams


@dataclass
class Pages:
    """`teams()` on five nodes with work in every state, for the HTML pages."""

    cluster: models.Cluster
    admin: Any
    alice: Any
    bob: Any
    running: models.Job  # team-a, 2 pods x 8 GPUs on node-1 and node-2
    shared: models.Job  # team-b, one pod with half of card 0 of node-3
    pending: models.Job  # team-b, 4 pods x 8 GPUs, unschedulable
    preempted: models.Job  # team-b, evicted by `running`
    failed_round: models.Round
    good_round: models.Round
    preemption: models.Preemption  # enacted
    blocked: models.Preemption


def pages_world() -> Pages:
    """A topology with a node outside it (no spine), NVIDIA and Ascend cards with whole and
    shared allocations, a queue, rounds (one failed), an enacted and a blocked preemption."""
    now = timezone.now()
    world = teams(
        layout={
            "node-1": ("s1", "b1", "nvidia"),
            "node-2": ("s1", "b1", "nvidia"),
            "node-3": ("s1", "b2", "nvidia"),
            "node-4": ("s2", "b3", "huawei"),
            "node-5": ("", "b4", "nvidia"),
        },
        gpu_quota={"root": (32, 40), "team-a": (16, 32), "team-b": (8, 24)},
        unhealthy={"node-3": (7,)},
    )
    nodes = {node.name: node for node in world.nodes}
    cluster, team_a, team_b = world.cluster, world.team_a, world.team_b
    earlier = now - timedelta(hours=3)
    running = gang(
        cluster,
        "train-a",
        quota=team_a,
        priority_class=world.prod,
        replicas=2,
        requests={"cpu": 32000, "memory": 128 * GIB, "nvidia.com/gpu": 8},
        gather=("BlockLayer", "MustGather"),
        nodes=[nodes["node-1"], nodes["node-2"]],
        annotations=whole_cards(8),
        now=now,
        submitted_at=earlier,
        started_at=now - timedelta(hours=1),
    )
    shared = gang(
        cluster,
        "notebook-b",
        quota=team_b,
        priority_class=world.batch,
        requests={"cpu": 4000, "memory": 16 * GIB, "koordinator.sh/gpu-core": 50},
        nodes=[nodes["node-3"]],
        annotations=card_allocation({0: 50}),
        now=now,
        submitted_at=earlier,
        started_at=now - timedelta(hours=2),
    )
    pending = gang(
        cluster,
        "big-b",
        quota=team_b,
        priority_class=world.batch,
        replicas=4,
        requests={"cpu": 8000, "nvidia.com/gpu": 8},
        now=now,
        submitted_at=earlier,
    )
    preempted = JobFactory(
        cluster=cluster,
        name="old-b",
        quota=team_b,
        priority_class=world.batch,
        priority=world.batch.value,
        state=JobState.PREEMPTED,
        submitted_at=earlier,
        started_at=now - timedelta(hours=5),
        total_number=1,
        min_available=1,
    )
    good_round = RoundFactory(
        cluster=cluster,
        started_at=now - timedelta(minutes=30),
        duration_ms=42,
        engine_ms=30,
        jobs_considered=3,
        jobs_placed=1,
        preemption_count=1,
    )
    failed_round = RoundFactory(
        cluster=cluster,
        state=models.Round.State.FAILED,
        started_at=now - timedelta(minutes=10),
        duration_ms=5,
        error="snapshot failed: node-9 vanished",
    )
    DecisionFactory(
        round=good_round,
        job=pending,
        reason="no candidate topology nodes can accommodate job, desiredOfferSlot: 4",
        details={
            "counterfactual": "fits block b1 if train-a is preempted",
            "cause": {
                "code": "TopologyNoDomain",
                "plugin": "NetworkTopology",
                "values": {"job_pods": 4, "pods": 4},
            },
        },
        created_at=now - timedelta(minutes=30),
    )
    DecisionFactory(
        round=good_round,
        job=running,
        outcome=models.Decision.Outcome.PLACED,
        reason="block b1",
        created_at=now - timedelta(minutes=30),
    )
    preemption = PreemptionFactory(
        round=good_round,
        preemptor=running,
        reason="train-a needs block b1",
        cost={"max_victim_priority": 5000, "jobs": 1},
        nominations={"train-a-0": "node-1"},
        created_at=now - timedelta(minutes=30),
    )
    VictimFactory(preemption=preemption, job=preempted, pods=["default/old-b-0"])
    blocked = PreemptionFactory(
        preemptor=running,
        state=models.Preemption.State.BLOCKED,
        reason="a PodDisruptionBudget allows no disruption",
        cost={},
        created_at=now - timedelta(minutes=5),
    )
    return Pages(
        cluster,
        world.admin,
        world.alice,
        world.bob,
        running,
        shared,
        pending,
        preempted,
        failed_round,
        good_round,
        preemption,
        blocked,
    )
