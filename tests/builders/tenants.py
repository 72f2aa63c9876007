"""The security tests' world: two tenants and an admin on one single-node cluster, tenant B's
names marked so that a leak into anything tenant A sees shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils import timezone

from koordweb import models
from koordweb.models import JobState, PodPhase
from tests.builders.accounts import UserFactory
from tests.builders.cluster import (
    GIB,
    ClusterFactory,
    NodeFactory,
    PriorityClassFactory,
    QuotaFactory,
)
from tests.builders.devices import DeviceFactory
from tests.builders.jobs import JobFactory, PodFactory
from tests.builders.rounds import DecisionFactory, PreemptionFactory, RoundFactory, VictimFactory
from tests.builders.topology import LayerFactory

# Anything that names tenant B's jobs or pods contains this; tenant A must never see it.
B_SECRET = "bravo-secret"


@dataclass
class Tenant:
    user: Any
    quota: models.ElasticQuota
    job: models.Job  # pending, 2 pods
    victim: models.Job  # preempted by `job`
    preemption: models.Preemption
    token_key: str
    token: str  # the clear text, for `Authorization: Token ...`
    pods: list[models.Pod] = field(default_factory=list)


@dataclass
class Tenants:
    """Two tenants and an admin on one single-node cluster, for the security tests."""

    cluster: models.Cluster
    admin: Any
    a: Tenant
    b: Tenant
    node: models.Node
    device: models.Device
    layer: models.TopologyLayer
    priority_class: models.PriorityClass
    round: models.Round


def _tenant(
    root: models.ElasticQuota, pc: models.PriorityClass, node: models.Node, tag: str, name: str
) -> Tenant:
    from knox.models import AuthToken

    now = timezone.now()
    cluster = root.cluster
    user = UserFactory(username=name)
    quota = QuotaFactory(
        cluster=cluster,
        name=f"{tag}-team",
        parent=root,
        min={"cpu": 8000},
        max={"cpu": 64000},
        members=[user],
    )
    prefix = B_SECRET if tag == "bravo" else f"{tag}-open"
    job = JobFactory(
        cluster=cluster,
        name=f"{prefix}-train",
        quota=quota,
        priority_class=pc,
        priority=pc.value,
        owner=user,
        submitted_at=now,
    )
    victim = JobFactory(
        cluster=cluster,
        name=f"{prefix}-victim",
        quota=quota,
        priority=1,
        owner=user,
        submitted_at=now - timedelta(minutes=5),
        state=JobState.PREEMPTED,
        total_number=1,
        min_available=1,
    )
    pods = [PodFactory(job=job, name=f"{job.name}-{i}", requests={"cpu": 1000}) for i in range(2)]
    pods.append(
        PodFactory(
            job=victim,
            name=f"{victim.name}-0",
            requests={"cpu": 1000},
            node=node,
            phase=PodPhase.FAILED,
        )
    )
    preemption = PreemptionFactory(preemptor=job, reason="priority", cost={})
    VictimFactory(preemption=preemption, job=victim, pods=[f"{victim.name}-0"], freed={"cpu": 1000})
    token, clear_text = AuthToken.objects.create(user=user)
    return Tenant(user, quota, job, victim, preemption, token.token_key, clear_text, pods)


def tenants() -> Tenants:
    """Tenant A (alice) in quota `alpha-team`, tenant B (bob) in `bravo-team`. Each owns a job
    with pods, a preemption inside their own quota and an API token; one round has decisions
    about both tenants' jobs. B's names contain B_SECRET, so a leak into any page A sees shows."""
    now = timezone.now()
    cluster = ClusterFactory(name="default")
    layer = LayerFactory(cluster=cluster, position=0)
    node = NodeFactory(
        cluster=cluster,
        name="node-0",
        allocatable={"cpu": 64000, "memory": 256 * GIB, "nvidia.com/gpu": 8},
        capacity={},
    )
    device = DeviceFactory(node=node, vendor="", model="", minor=0, resources={})
    pc = PriorityClassFactory(cluster=cluster, name="koord-batch", value=5000)
    root = QuotaFactory(cluster=cluster, name="root", is_parent=True, min={}, max={})
    admin = UserFactory(
        username="root-admin",
        email="admin@example.invalid",
        is_staff=True,
        is_superuser=True,
    )
    a = _tenant(root, pc, node, "alpha", "alice")
    b = _tenant(root, pc, node, "bravo", "bob")
    the_round = RoundFactory(cluster=cluster, started_at=now, finished_at=now)
    for tenant in (a, b):
        DecisionFactory(
            round=the_round,
            job=tenant.job,
            reason=f"{tenant.job.name} does not fit",
            created_at=now,
        )
        tenant.preemption.round = the_round
        tenant.preemption.save(update_fields=["round"])
    return Tenants(cluster, admin, a, b, node, device, layer, pc, the_round)
