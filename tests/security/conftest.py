"""Two tenants and an admin on one cluster, built with the ORM, for the security tests.

Tenant A (alice) is a member of quota `alpha-team`, tenant B (bob) of `bravo-team`. Each owns a
job with pods, a preemption inside their own quota, and an API token; a round has decisions about
both tenants' jobs. B's job name is distinctive so a leak into any page A sees is easy to spot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.utils import timezone
from knox.models import AuthToken

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

# Anything that names tenant B's jobs or pods contains this; tenant A must never see it.
B_SECRET = "bravo-secret"


@dataclass
class Tenant:
    user: Any
    quota: ElasticQuota
    job: Job
    victim: Job
    preemption: Preemption
    token_key: str
    token: str  # the clear text, for `Authorization: Token ...`
    pods: list[Pod] = field(default_factory=list)


@dataclass
class World:
    cluster: Cluster
    admin: Any
    a: Tenant
    b: Tenant
    node: Node
    device: Device
    layer: TopologyLayer
    priority_class: PriorityClass
    round: Round


@pytest.fixture(autouse=True)
def _private_cache(settings: Any) -> None:
    """A private in-memory cache: API throttles and login counters never leak between runs."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "security-tests",
        }
    }
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    caches["default"].clear()


def _tenant(
    cluster: Cluster, root: ElasticQuota, pc: PriorityClass, node: Node, tag: str, username: str
) -> Tenant:
    now = timezone.now()
    user = get_user_model().objects.create_user(username=username, password="tenant-pw-1234")
    quota = ElasticQuota.objects.create(
        cluster=cluster, name=f"{tag}-team", parent=root, min={"cpu": 8000}, max={"cpu": 64000}
    )
    quota.members.add(user)
    prefix = B_SECRET if tag == "bravo" else f"{tag}-open"
    job = Job.objects.create(
        cluster=cluster,
        name=f"{prefix}-train",
        quota=quota,
        priority_class=pc,
        priority=pc.value,
        owner=user,
        total_number=2,
        min_available=2,
        submitted_at=now,
        state=JobState.PENDING,
    )
    victim = Job.objects.create(
        cluster=cluster,
        name=f"{prefix}-victim",
        quota=quota,
        priority=1,
        owner=user,
        submitted_at=now - timedelta(minutes=5),
        state=JobState.PREEMPTED,
    )
    pods = [
        Pod.objects.create(
            cluster=cluster,
            job=job,
            name=f"{job.name}-{index}",
            requests={"cpu": 1000},
            created_at=now,
            phase=PodPhase.PENDING,
        )
        for index in range(2)
    ]
    pods.append(
        Pod.objects.create(
            cluster=cluster,
            job=victim,
            name=f"{victim.name}-0",
            requests={"cpu": 1000},
            created_at=now,
            node=node,
            phase=PodPhase.FAILED,
        )
    )
    preemption = Preemption.objects.create(
        cluster=cluster,
        preemptor=job,
        state=Preemption.State.ENACTED,
        reason="priority",
        created_at=now,
    )
    PreemptionVictim.objects.create(
        preemption=preemption, job=victim, pods=[f"{victim.name}-0"], freed={"cpu": 1000}
    )
    token, clear_text = AuthToken.objects.create(user=user)
    return Tenant(user, quota, job, victim, preemption, token.token_key, clear_text, pods)


@pytest.fixture
def world(db: Any) -> World:
    now = timezone.now()
    cluster = Cluster.objects.create(name="default")
    layer = TopologyLayer.objects.create(cluster=cluster, name="BlockLayer", position=0)
    node = Node.objects.create(
        cluster=cluster,
        name="node-0",
        allocatable={"cpu": 64000, "memory": 256 * 1024**3, "nvidia.com/gpu": 8},
    )
    device = Device.objects.create(node=node, device_type="gpu", minor=0)
    pc = PriorityClass.objects.create(cluster=cluster, name="koord-batch", value=5000)
    root = ElasticQuota.objects.create(cluster=cluster, name="root", is_parent=True)
    admin = get_user_model().objects.create_superuser(
        username="root-admin", password="admin-pw-1234", email="admin@example.invalid"
    )
    a = _tenant(cluster, root, pc, node, "alpha", "alice")
    b = _tenant(cluster, root, pc, node, "bravo", "bob")
    the_round = Round.objects.create(
        cluster=cluster, state=Round.State.SUCCEEDED, started_at=now, finished_at=now
    )
    for tenant in (a, b):
        Decision.objects.create(
            round=the_round,
            job=tenant.job,
            outcome=Decision.Outcome.UNSCHEDULABLE,
            reason=f"{tenant.job.name} does not fit",
            created_at=now,
        )
        tenant.preemption.round = the_round
        tenant.preemption.save(update_fields=["round"])
    return World(cluster, admin, a, b, node, device, layer, pc, the_round)
