"""The one test world builder: factory_boy factories for every row a test needs, the shapes
tests share (a spine/block topology, a GPU node with its cards, a gang of pods) and the named
worlds built from them (two teams, the pages' cluster, two tenants, the load test's cluster).

A test builds the rows it reads; none depends on the demo (`koordweb.services.demo`), which only
the demo's own tests seed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from koordweb import models
from koordweb.models import JobState, PodPhase

SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
GIB = 1024**3
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests-only")


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Cluster
        django_get_or_create = ("name",)

    name = "default"


class LayerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.TopologyLayer

    cluster = factory.SubFactory(ClusterFactory)
    name = "BlockLayer"


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Node

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"node-{n}")
    allocatable = factory.LazyFunction(
        lambda: {"cpu": 64000, "memory": 512 * 2**30, "pods": 110, "nvidia.com/gpu": 8}
    )
    capacity = factory.LazyAttribute(lambda node: dict(node.allocatable))


class DeviceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Device

    node = factory.SubFactory(NodeFactory)
    device_type = "gpu"
    vendor = "nvidia"
    model = "H100"
    minor = factory.Sequence(lambda n: n)
    resources = factory.LazyFunction(
        lambda: {"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory-ratio": 100}
    )


class PriorityClassFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.PriorityClass

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"class-{n}")
    value = 5000


class QuotaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.ElasticQuota
        skip_postgeneration_save = True

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"quota-{n}")
    min = factory.LazyFunction(lambda: {"cpu": 64000, "nvidia.com/gpu": 8})
    max = factory.LazyFunction(lambda: {"cpu": 128000, "nvidia.com/gpu": 16})

    @factory.post_generation
    def members(self, create: bool, extracted: list[object] | None, **kwargs: object) -> None:
        if create and extracted:
            self.members.add(*extracted)


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Job

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"job-{n}")
    quota = factory.SubFactory(QuotaFactory, cluster=factory.SelfAttribute("..cluster"))
    submitted_at = factory.LazyFunction(timezone.now)
    total_number = 2
    min_available = 2


class PodFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Pod

    job = factory.SubFactory(JobFactory)
    cluster = factory.SelfAttribute("job.cluster")
    namespace = factory.SelfAttribute("job.namespace")
    name = factory.Sequence(lambda n: f"pod-{n}")
    requests = factory.LazyFunction(lambda: {"cpu": 4000, "nvidia.com/gpu": 1})
    created_at = factory.LazyFunction(timezone.now)


class RoundFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Round

    cluster = factory.SubFactory(ClusterFactory)
    state = "succeeded"
    started_at = factory.LazyFunction(timezone.now)


class DecisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Decision

    round = factory.SubFactory(RoundFactory, cluster=factory.SelfAttribute("..job.cluster"))
    job = factory.SubFactory(JobFactory)
    outcome = "unschedulable"
    reason = "no candidate topology nodes can accommodate job"
    created_at = factory.LazyFunction(timezone.now)


class PreemptionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Preemption

    preemptor = factory.SubFactory(JobFactory)
    cluster = factory.SelfAttribute("preemptor.cluster")
    state = "enacted"
    reason = "higher priority job needs the block"
    cost = factory.LazyFunction(lambda: {"victim_jobs": 1, "max_victim_priority": 1})
    created_at = factory.LazyFunction(timezone.now)


class VictimFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.PreemptionVictim

    preemption = factory.SubFactory(PreemptionFactory)
    job = factory.SubFactory(JobFactory)
    pods = factory.LazyFunction(list)
    freed = factory.LazyFunction(lambda: {"nvidia.com/gpu": 8})


# Shapes -------------------------------------------------------------------------------------


def topology(cluster: models.Cluster) -> None:
    """Spine > block > node, read from the SPINE and BLOCK node labels."""
    layers = (
        ("SpineLayer", "", [SPINE]),
        ("BlockLayer", "SpineLayer", [BLOCK]),
        ("NodeTopologyLayer", "BlockLayer", []),
    )
    for position, (name, parent, keys) in enumerate(layers):
        LayerFactory(
            cluster=cluster, name=name, parent_name=parent, label_keys=keys, position=position
        )


def gpu_node(
    cluster: models.Cluster,
    name: str,
    *,
    block: str,
    spine: str = "",
    cards: int = 8,
    vendor: str = "nvidia",
    model: str = "H100",
    resource: str = "nvidia.com/gpu",
    cpu: int = 64000,
    unhealthy: tuple[int, ...] = (),
) -> models.Node:
    """A node in `block` (and `spine`, when given) with `cards` accelerators of one kind."""
    labels = {BLOCK: block, "node.koordinator.sh/gpu-vendor": vendor}
    if spine:
        labels[SPINE] = spine
    node = NodeFactory(
        cluster=cluster,
        name=name,
        labels=labels,
        allocatable={"cpu": cpu, "memory": 512 * GIB, "pods": 110, resource: cards},
    )
    for minor in range(cards):
        DeviceFactory(
            node=node,
            vendor=vendor,
            model=model,
            minor=minor,
            numa_node=minor // 4,
            pcie_id=f"pci{minor // 2}",
            health=minor not in unhealthy,
        )
    return node


def card_allocation(shares: dict[int, int]) -> dict[str, str]:
    """The device-allocated annotation of a pod holding, per card minor, a gpu-core percent."""
    cards = [{"minor": m, "resources": {"koordinator.sh/gpu-core": c}} for m, c in shares.items()]
    return {DEVICE_ALLOCATED: json.dumps({"gpu": cards})}


def whole_cards(count: int) -> dict[str, str]:
    """The device-allocated annotation of a pod holding cards 0 .. count-1 whole."""
    return card_allocation(dict.fromkeys(range(count), 100))


def card_report(
    node: models.Node, at: datetime, cards: dict[int, int], pods: dict[str, dict[int, int]]
) -> models.NodeMetric:
    """A koordlet NodeMetric: each card's busy percent, and per pod (namespace/name) its busy
    percent on each card it holds."""
    return models.NodeMetric.objects.create(
        node=node,
        reported_at=at,
        gpu_usage={
            str(m): {"koordinator.sh/gpu-core": b, "koordinator.sh/gpu-memory": 10 * GIB}
            for m, b in cards.items()
        },
        pod_gpu_usage={
            pod: {str(m): {"koordinator.sh/gpu-core": b} for m, b in usage.items()}
            for pod, usage in pods.items()
        },
    )


def gang(
    cluster: models.Cluster,
    name: str,
    *,
    quota: models.ElasticQuota,
    priority_class: models.PriorityClass | None = None,
    replicas: int = 1,
    requests: dict[str, int] | None = None,
    gather: tuple[str, str] | None = None,
    nodes: list[models.Node] | None = None,
    annotations: dict[str, str] | None = None,
    now: datetime | None = None,
    **job_fields: Any,
) -> models.Job:
    """A gang job of `replicas` pods, all or none; on `nodes` (one pod each) it is running.

    `gather` is (layer, strategy), e.g. ("BlockLayer", "MustGather").
    """
    now = now or timezone.now()
    spec = {"gatherStrategy": [{"layer": gather[0], "strategy": gather[1]}]} if gather else {}
    job_fields.setdefault("submitted_at", now - timedelta(minutes=5))
    if nodes:
        job_fields.setdefault("state", JobState.RUNNING)
        job_fields.setdefault("started_at", now)
    namespace = job_fields.pop("namespace", quota.namespace or "default")
    job = JobFactory(
        cluster=cluster,
        name=name,
        namespace=namespace,
        quota=quota,
        priority_class=priority_class,
        priority=priority_class.value if priority_class else 0,
        total_number=replicas,
        min_available=replicas,
        topology_spec=spec,
        gang_group=f"{namespace}/{name}",
        **job_fields,
    )
    for index in range(replicas):
        node = nodes[index] if nodes else None
        PodFactory(
            job=job,
            name=f"{name}-{index}",
            requests=dict(requests or {"cpu": 8000, "nvidia.com/gpu": 8}),
            priority=job.priority,
            priority_class_name=priority_class.name if priority_class else "",
            labels={"quota.scheduling.koordinator.sh/name": quota.name},
            annotations=dict(annotations or {}),
            node=node,
            phase=PodPhase.RUNNING if node else PodPhase.PENDING,
            bound_at=now if node else None,
            started_at=now if node else None,
            created_at=now,
        )
    return job


def card_holder(
    quota: models.ElasticQuota, node: models.Node, shares: dict[int, int], name: str
) -> models.Job:
    """A running one-pod job of `quota` (in its namespace) on `node`, holding per card minor a
    gpu-core percent."""
    return gang(
        node.cluster,
        name,
        quota=quota,
        namespace=quota.name,
        nodes=[node],
        requests={"cpu": 4000, "nvidia.com/gpu": 1},
        annotations=card_allocation(shares),
    )


# API clients --------------------------------------------------------------------------------


def token_client(user: Any) -> APIClient:
    """An API client that authenticates as `user` with a fresh token."""
    from koordweb.services.tokens import token_create

    client = APIClient()
    _, clear_text = token_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {clear_text}")
    return client


def submission(**overrides: Any) -> dict[str, Any]:
    """A valid job submission for team-a of `teams()`, with `overrides`."""
    body: dict[str, Any] = {
        "name": "train",
        "quota": "team-a",
        "priority_class": "koord-prod",
        "replicas": 2,
        "pod": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"}},
        "topology": {"gather": [{"layer": "BlockLayer", "strategy": "MustGather"}]},
        "duration_seconds": 3600,
    }
    body.update(overrides)
    return body


# Worlds -------------------------------------------------------------------------------------


@dataclass
class Teams:
    """One cluster, an admin and two teams: alice in quota team-a, bob in team-b."""

    cluster: models.Cluster
    admin: Any
    alice: Any
    bob: Any
    root: models.ElasticQuota
    team_a: models.ElasticQuota
    team_b: models.ElasticQuota
    prod: models.PriorityClass  # koord-prod, 9000
    batch: models.PriorityClass  # koord-batch, 5000
    nodes: list[models.Node]


# name: (spine, block, vendor); four nodes of 8 H100s, a block each, two blocks a spine.
FOUR_BLOCKS = {f"node-{i}": (f"s{i // 2}", f"b{i}", "nvidia") for i in range(4)}


def teams(
    layout: dict[str, tuple[str, str, str]] | None = None,
    gpu_quota: dict[str, tuple[int, int]] | None = None,
    unhealthy: dict[str, tuple[int, ...]] | None = None,
) -> Teams:
    """`layout` names each node's (spine, block, vendor); `gpu_quota` (min, max) GPUs per quota."""
    cluster = ClusterFactory(name="default")
    topology(cluster)
    nodes = []
    for name, (spine, block, vendor) in (layout or FOUR_BLOCKS).items():
        huawei = vendor == "huawei"
        nodes.append(
            gpu_node(
                cluster,
                name,
                spine=spine,
                block=block,
                vendor=vendor,
                model="910B3" if huawei else "H100",
                resource="huawei.com/npu" if huawei else "nvidia.com/gpu",
                unhealthy=(unhealthy or {}).get(name, ()),
            )
        )
    admin = UserFactory(username="admin", is_staff=True, is_superuser=True)
    alice = UserFactory(username="alice")
    bob = UserFactory(username="bob")

    def limits(name: str) -> dict[str, Any]:
        if gpu_quota is None:
            return {}
        low, high = gpu_quota[name]
        return {"min": {"nvidia.com/gpu": low}, "max": {"nvidia.com/gpu": high}}

    root = QuotaFactory(cluster=cluster, name="root", is_parent=True, **limits("root"))
    team_a = QuotaFactory(
        cluster=cluster, name="team-a", parent=root, members=[alice], **limits("team-a")
    )
    team_b = QuotaFactory(
        cluster=cluster, name="team-b", parent=root, members=[bob], **limits("team-b")
    )
    prod = PriorityClassFactory(cluster=cluster, name="koord-prod", value=9000)
    batch = PriorityClassFactory(
        cluster=cluster, name="koord-batch", value=5000, global_default=True
    )
    return Teams(cluster, admin, alice, bob, root, team_a, team_b, prod, batch, nodes)


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
        details={"counterfactual": "fits block b1 if train-a is preempted"},
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


@dataclass
class LoadWorld:
    """The load tests' cluster and one API token per client."""

    cluster: Any
    tokens: list[str]


def load_world(clients: int = 8) -> LoadWorld:
    """A cluster of four 64-CPU nodes, quota team-a for one user, one API token per client."""
    from koordweb.services.tokens import token_create

    cluster = ClusterFactory(name="default")
    for i in range(4):
        NodeFactory(cluster=cluster, name=f"node-{i}")
    user = UserFactory(username="loader")
    root = QuotaFactory(cluster=cluster, name="root", is_parent=True)
    QuotaFactory(
        cluster=cluster,
        name="team-a",
        parent=root,
        members=[user],
        min={"cpu": 64000},
        max={"cpu": 10**9},
    )
    PriorityClassFactory(cluster=cluster, name="koord-batch", value=5000, global_default=True)
    return LoadWorld(cluster, [token_create(user=user)[1] for _ in range(clients)])


def superpod(
    cluster: models.Cluster, *, spines: int, blocks: int, nodes: int, cpu: int = 128000
) -> list[models.Node]:
    """The topology and `spines` x `blocks` (a spine) x `nodes` (a block) nodes of 8 H100s,
    named node-001, ... and placed in blocks b1, b2, ... across the spines in order."""
    topology(cluster)
    made = []
    for index in range(spines * blocks * nodes):
        block = index // nodes
        made.append(
            gpu_node(
                cluster,
                f"node-{index + 1:03d}",
                spine=f"s{block // blocks + 1}",
                block=f"b{block + 1}",
                cpu=cpu,
            )
        )
    return made


@dataclass
class Busy:
    """Three teams on two spines of two 4-node blocks (16 nodes of 8 GPUs): running gangs hold
    half of it, pending gangs of every topology rule wait for the first round, which places them
    all and fills the cluster."""

    cluster: models.Cluster
    nodes: list[models.Node]
    running: list[models.Job]  # vit-pretrain (b1), llm-sft (b2), asr-finetune (b3)
    pending: list[models.Job]  # detector-sweep (MustGather block), tts-eval, embedding-index


def busy_cluster(name: str = "default") -> Busy:
    """GPU quotas: root 128 (the cluster); team-vision (alice) min 32, team-nlp (bob) min 64,
    team-speech (carol) min 32; each at most 96. Priority classes koord-prod 9000, koord-mid
    7000, koord-batch 5000, koord-free 3000."""
    cluster = ClusterFactory(name=name)
    nodes = superpod(cluster, spines=2, blocks=2, nodes=4)
    classes = {
        pc: PriorityClassFactory(cluster=cluster, name=pc, value=value)
        for pc, value in (
            ("koord-prod", 9000),
            ("koord-mid", 7000),
            ("koord-batch", 5000),
            ("koord-free", 3000),
        )
    }
    root = QuotaFactory(
        cluster=cluster,
        name="root",
        is_parent=True,
        min={"nvidia.com/gpu": 128},
        max={"nvidia.com/gpu": 128},
    )
    quotas = {
        team: QuotaFactory(
            cluster=cluster,
            name=team,
            namespace=team,
            parent=root,
            min={"nvidia.com/gpu": low},
            max={"nvidia.com/gpu": 96},
            members=[UserFactory(username=user)],
        )
        for team, user, low in (
            ("team-vision", "alice", 32),
            ("team-nlp", "bob", 64),
            ("team-speech", "carol", 32),
        )
    }
    whole = whole_cards(8)
    eight = {"cpu": 64000, "memory": 512 * GIB, "nvidia.com/gpu": 8}
    running = [
        gang(
            cluster,
            name,
            quota=quotas[team],
            priority_class=classes[pc],
            replicas=len(on),
            requests=eight,
            nodes=on,
            annotations=whole,
            duration_seconds=duration,
        )
        for team, name, pc, on, duration in (
            ("team-vision", "vit-pretrain", "koord-batch", nodes[0:4], 1800),
            ("team-nlp", "llm-sft", "koord-mid", nodes[4:6], 900),
            ("team-speech", "asr-finetune", "koord-free", nodes[8:10], 600),
        )
    ]
    pending = [
        gang(
            cluster,
            name,
            quota=quotas[team],
            priority_class=classes[pc],
            replicas=replicas,
            requests=eight,
            gather=gather,
            duration_seconds=duration,
        )
        for team, name, pc, replicas, gather, duration in (
            ("team-vision", "detector-sweep", "koord-batch", 4, ("BlockLayer", "MustGather"), 300),
            ("team-speech", "tts-eval", "koord-free", 2, None, 240),
            ("team-nlp", "embedding-index", "koord-batch", 2, ("BlockLayer", "PreferGather"), 600),
        )
    ]
    return Busy(cluster, nodes, running, pending)


def simulated_round(cluster: models.Cluster, now: datetime | None = None) -> Any:
    """One manual round of `cluster` on the simulated backend at `now`; its outcome."""
    from koordweb.backends.simulated import SimulatedBackend
    from koordweb.services.records import round_execute

    return round_execute(
        cluster=cluster,
        backend=SimulatedBackend(),
        trigger=models.Round.Trigger.MANUAL,
        now=now or timezone.now(),
    )


def nlp_submits(
    cluster: models.Cluster,
    name: str,
    *,
    priority_class: str,
    replicas: int,
    cpu: int = 8000,
    gather: str | None = None,
) -> models.Job:
    """bob submits, through the submission service, a job of 8-GPU pods to team-nlp of
    `busy_cluster()`; `gather` names the layer its pods must share (MustGather)."""
    from koordweb.services.jobs import GatherRule, JobSpec, PodShape, job_submit

    bob = cluster.quotas.get(name="team-nlp").members.get()
    job, _ = job_submit(
        user=bob,
        spec=JobSpec(
            name=name,
            namespace="team-nlp",
            quota="team-nlp",
            priority_class=priority_class,
            replicas=replicas,
            pod=PodShape(requests={"cpu": cpu, "nvidia.com/gpu": 8}),
            gather=(GatherRule(gather, "MustGather"),) if gather else (),
        ),
    )
    return job


def urgent_spine_gang(cluster: models.Cluster, replicas: int = 4) -> models.Job:
    """prod-refresh: koord-prod pods of 8 GPUs that must share a spine of `busy_cluster()`.
    After the first round fills the cluster, only evictions make room for it."""
    return nlp_submits(
        cluster, "prod-refresh", priority_class="koord-prod", replicas=replicas, gather="SpineLayer"
    )
