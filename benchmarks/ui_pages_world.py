"""The generated cluster of `benchmarks.ui_pages`: the cluster `tests/koordweb/ui/test_walk.py`
walks (`benchmarks.e2e_scale.build_cluster`), with H800 cards, Ascend NPU and Cambricon MLU nodes,
quotas and a tenant, then simulated minutes of rounds, koordlet reports and GPU samples ending
now, with waves of production gangs that preempt (the page module's docstring says what is in it).
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

CLUSTER = "ui-pages"
GI = 1024**3
SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
NODES_PER_BLOCK = 16
# Minutes at which production gangs of 4 pods x 8 GPUs arrive, one per 50 GPU nodes (at least 2).
WAVES = (4, 12, 20)
GPU_NODES_PER_GANG = 50
USERS = ("ui-admin", "ui-tenant")
PRIORITY_CLASSES = (("koord-prod", 9000), ("koord-batch", 5000), ("koord-free", 3000))


def progress(text: str) -> None:
    print(f"[ui_pages {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass
class World:
    cluster: Any
    admin: Any
    tenant: Any
    gpu_nodes: int
    timings: dict[str, float] = field(default_factory=dict)


def build_world(*, nodes: int, minutes: int, seed: int = 7) -> World:
    """The cluster as described in the module's docstring; `minutes` of rounds and samples."""
    from django.utils import timezone

    from benchmarks.e2e_scale import build_cluster

    started = time.perf_counter()
    accel = max(1, nodes // 20)
    gpu_nodes = nodes - 2 * accel
    now = timezone.now().replace(second=0, microsecond=0)
    t0 = now - timedelta(minutes=minutes)
    cluster = build_cluster(CLUSTER, gpu_nodes, pending_pods=gpu_nodes, seed=seed)
    cluster.scheduler_args = {}
    cluster.save(update_fields=["scheduler_args"])
    admin, tenant = _people(cluster)
    _gpu_cards(cluster)
    _accelerator_nodes(cluster, start=gpu_nodes, npu=accel, mlu=accel)
    _quotas(cluster, tenant, gpu_nodes)
    _waiting_accelerator_jobs(cluster, random.Random(seed), accel, t0)
    _never_fits(cluster, t0)
    _backdate(cluster, t0 - timedelta(minutes=10))
    world = World(cluster, admin, tenant, gpu_nodes)
    world.timings["build_s"] = round(time.perf_counter() - started, 1)
    progress(f"rows written: {cluster.nodes.count()} nodes in {world.timings['build_s']} s")
    _minutes(world, t0, minutes)
    return world


def load_world() -> World | None:
    """The cluster an earlier run built (in the same database), or None."""
    from django.contrib.auth import get_user_model

    from koordweb.models import Cluster
    from scheduler.vocabulary import NVIDIA_GPU

    cluster = Cluster.objects.filter(name=CLUSTER).first()
    users = {u.username: u for u in get_user_model().objects.filter(username__in=USERS)}
    if cluster is None or len(users) != len(USERS):
        return None
    gpu_nodes = sum(
        1 for a in cluster.nodes.values_list("allocatable", flat=True) if NVIDIA_GPU in a
    )
    return World(cluster, users[USERS[0]], users[USERS[1]], gpu_nodes)


def _people(cluster: Any) -> tuple[Any, Any]:
    from django.contrib.auth import get_user_model

    from koordweb.models import PriorityClass

    users = get_user_model().objects
    users.filter(username__in=USERS).delete()
    admin = users.create_user(USERS[0], is_staff=True, is_superuser=True)
    tenant = users.create_user(USERS[1])
    for name, value in PRIORITY_CLASSES:
        PriorityClass.objects.create(cluster=cluster, name=name, value=value)
    return admin, tenant


def _allocatable(cards: int, vendor_resources: dict[str, int], memory: int) -> dict[str, int]:
    from scheduler.vocabulary import GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO

    return {
        "cpu": 128_000,
        "memory": 1024 * GI,
        "pods": 110,
        **vendor_resources,
        GPU_CORE: 100 * cards,
        GPU_MEMORY_RATIO: 100 * cards,
        GPU_MEMORY: memory * cards,
    }


def _cards(node: Any, vendor: str, model: str, memory: int) -> list[Any]:
    from koordweb.models import Device
    from scheduler.vocabulary import GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO

    return [
        Device(
            node=node,
            device_type=Device.Type.GPU,
            vendor=vendor,
            model=model,
            minor=minor,
            uuid=f"{vendor}-{node.name}-{minor}",
            resources={GPU_CORE: 100, GPU_MEMORY_RATIO: 100, GPU_MEMORY: memory},
            numa_node=minor // 4,
            pcie_id=f"pci{minor // 2}",
        )
        for minor in range(8)
    ]


def _gpu_cards(cluster: Any) -> None:
    """Eight H800s on every GPU node; the busy pods hold theirs whole."""
    from koordweb.models import Device, Node, Pod
    from scheduler.vocabulary import (
        ANNOTATION_DEVICE_ALLOCATED,
        GPU_CORE,
        GPU_MEMORY,
        GPU_MEMORY_RATIO,
        LABEL_GPU_MODEL,
        LABEL_GPU_VENDOR,
        NVIDIA_GPU,
    )

    memory = 80 * GI
    rows = list(cluster.nodes.all())
    devices: list[Any] = []
    for node in rows:
        node.labels = {**node.labels, LABEL_GPU_VENDOR: "nvidia", LABEL_GPU_MODEL: "H800"}
        node.allocatable = node.capacity = _allocatable(8, {NVIDIA_GPU: 8}, memory)
        devices += _cards(node, "nvidia", "H800", memory)
    Node.objects.bulk_update(rows, ["labels", "allocatable", "capacity"], batch_size=1000)
    Device.objects.bulk_create(devices, batch_size=2000)
    whole = {
        "gpu": [
            {"minor": m, "resources": {GPU_CORE: 100, GPU_MEMORY_RATIO: 100, GPU_MEMORY: memory}}
            for m in range(8)
        ]
    }
    Pod.objects.filter(cluster=cluster, node__isnull=False).update(
        annotations={ANNOTATION_DEVICE_ALLOCATED: json.dumps(whole, separators=(",", ":"))}
    )


def _accelerator_nodes(cluster: Any, *, start: int, npu: int, mlu: int) -> None:
    """Ascend 910B3 and Cambricon MLU370 nodes, eight cards each, in blocks of a spine of their
    own."""
    from koordweb.models import Device, Node
    from scheduler.vocabulary import (
        CAMBRICON_MLU,
        HUAWEI_NPU,
        LABEL_GPU_MODEL,
        LABEL_GPU_VENDOR,
        NPU_CORE,
        NPU_CPU,
        NPU_DVPP,
    )

    kinds = (
        (
            "huawei",
            "Ascend-910B3",
            64 * GI,
            {HUAWEI_NPU: 8, NPU_CORE: 160, NPU_CPU: 56, NPU_DVPP: 800},
            npu,
        ),
        ("cambricon", "MLU370", 48 * GI, {CAMBRICON_MLU: 8}, mlu),
    )
    made: list[Any] = []
    serial = start
    for vendor, model, memory, resources, count in kinds:
        for k in range(count):
            block = f"{vendor}-block-{k // NODES_PER_BLOCK}"
            labels = {
                SPINE: "spine-accel",
                BLOCK: block,
                LABEL_GPU_VENDOR: vendor,
                LABEL_GPU_MODEL: model,
            }
            allocatable = _allocatable(8, resources, memory)
            made.append(
                Node(
                    cluster=cluster,
                    name=f"node-{serial:05d}",
                    labels=labels,
                    allocatable=allocatable,
                    capacity=dict(allocatable),
                )
            )
            serial += 1
    saved = Node.objects.bulk_create(made, batch_size=1000)
    devices: list[Any] = []
    for node in saved:
        vendor = node.labels[LABEL_GPU_VENDOR]
        kind = next(k for k in kinds if k[0] == vendor)
        devices += _cards(node, vendor, kind[1], kind[2])
    Device.objects.bulk_create(devices, batch_size=2000)


def _quotas(cluster: Any, tenant: Any, gpu_nodes: int) -> None:
    """A root and three teams by namespace (batch: the busy pods, train: the gangs, accel: the
    NPU and MLU jobs); the tenant is a member of batch and train. Every job joins its
    namespace's quota."""
    from koordweb.models import ElasticQuota, Job
    from scheduler.vocabulary import NVIDIA_GPU

    gpus = gpu_nodes * 8
    big = {NVIDIA_GPU: gpus * 2, "cpu": 10**9}
    root = ElasticQuota.objects.create(
        cluster=cluster, name="root", is_parent=True, min=dict(big), max=dict(big)
    )
    # train's min covers the whole cluster, so its production gangs pass quota admission and
    # preempt lower priorities anywhere (not only inside their quota).
    shares = {"batch": gpus // 2, "train": gpus, "accel": 0}
    for team, share in shares.items():
        quota = ElasticQuota.objects.create(
            cluster=cluster,
            name=team,
            namespace=team,
            parent=root,
            min={NVIDIA_GPU: share, "cpu": 4_000_000},
            max=dict(big),
        )
        Job.objects.filter(cluster=cluster, namespace=team).update(quota=quota)
        if team in ("train", "batch"):
            quota.members.add(tenant)


def _job(
    cluster: Any,
    name: str,
    namespace: str,
    *,
    pods: int,
    requests: dict[str, int],
    priority: str,
    at: datetime,
    duration: int | None = None,
    node_selector: dict[str, str] | None = None,
) -> Any:
    """A gang of `pods` identical pending pods in `namespace`'s quota, submitted `at`."""
    from koordweb.models import Job, JobState, Pod, PriorityClass
    from scheduler.vocabulary import QUOTA_NAME

    pc = PriorityClass.objects.get(cluster=cluster, name=priority)
    quota = cluster.quotas.get(name=namespace)
    job = Job.objects.create(
        cluster=cluster,
        namespace=namespace,
        name=name,
        kind=Job.Kind.GANG,
        quota=quota,
        priority_class=pc,
        priority=pc.value,
        min_available=pods,
        total_number=pods,
        submitted_at=at,
        duration_seconds=duration,
        gang_group=f"{namespace}/{name}",
        state=JobState.PENDING,
    )
    Pod.objects.bulk_create(
        [
            Pod(
                cluster=cluster,
                job=job,
                namespace=namespace,
                name=f"{name}-{k}",
                requests=dict(requests),
                limits=dict(requests),
                labels={QUOTA_NAME: namespace},
                node_selector=dict(node_selector or {}),
                priority=pc.value,
                priority_class_name=pc.name,
                created_at=at,
            )
            for k in range(pods)
        ]
    )
    return job


def _waiting_accelerator_jobs(cluster: Any, rng: random.Random, accel: int, at: datetime) -> None:
    """NPU jobs of whole cards asking for about 80% of the NPUs; MLU jobs of sMLU slices (half a
    card, 12 GiB) and a few of whole MLUs, which Cambricon cards refuse (they wait, with the
    reason); some jobs finish within the run."""
    from scheduler.vocabulary import (
        CAMBRICON_MLU,
        GPU_CORE,
        GPU_MEMORY,
        GPU_SHARED,
        HUAWEI_NPU,
        LABEL_GPU_VENDOR,
    )

    slice_ = {GPU_SHARED: 1, GPU_CORE: 50, GPU_MEMORY: 12 * GI}
    kinds: tuple[tuple[str, int, Callable[[int], dict[str, int]], dict[str, str]], ...] = (
        ("npu", accel * 8 * 4 // 5, lambda cards: {HUAWEI_NPU: cards}, {}),
        ("mlu", accel * 8, lambda cards: dict(slice_), {LABEL_GPU_VENDOR: "cambricon"}),
    )
    for word, wanted, shape, selector in kinds:
        asked, k = 0, 0
        while asked < wanted:
            pods, cards = rng.choice((1, 2, 4)), rng.choice((4, 8))
            requests = {"cpu": 4000 * cards, "memory": 64 * GI * cards, **shape(cards)}
            if word == "mlu" and k % 5 == 4:
                requests = {"cpu": 16_000, "memory": 128 * GI, CAMBRICON_MLU: 2}
            _job(
                cluster,
                f"{word}-job-{k:03d}",
                "accel",
                pods=pods,
                requests=requests,
                priority=rng.choice(("koord-batch", "koord-free")),
                at=at,
                duration=rng.choice((None, None, 15 * 60)),
                node_selector=selector,
            )
            asked += pods * cards
            k += 1


def _never_fits(cluster: Any, at: datetime) -> None:
    """A train gang of more 8-GPU pods than a block has nodes, kept within a block: it waits
    whatever the rounds do (the pages' "can never run" case)."""
    from koordweb.models import Job
    from scheduler.vocabulary import NVIDIA_GPU

    requests = {"cpu": 16_000, "memory": 256 * GI, NVIDIA_GPU: 8}
    job = _job(
        cluster,
        "wider-than-a-block",
        "train",
        pods=NODES_PER_BLOCK + 4,
        requests=requests,
        priority="koord-batch",
        at=at,
    )
    rule = {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]}
    Job.objects.filter(pk=job.pk).update(topology_spec=rule)


def _backdate(cluster: Any, at: datetime) -> None:
    """Every job and pod written so far was submitted at `at` (the first round comes after)."""
    from koordweb.models import Job, Pod

    Job.objects.filter(cluster=cluster).update(submitted_at=at)
    Pod.objects.filter(cluster=cluster).update(created_at=at)
    Job.objects.filter(cluster=cluster, started_at__isnull=False).update(started_at=at)
    Pod.objects.filter(cluster=cluster, node__isnull=False).update(bound_at=at, started_at=at)


def _wave(cluster: Any, minute: int, count: int, at: datetime) -> None:
    """Production gangs (4 pods x 8 GPUs, a third of them kept within a block) on a full
    cluster: only evictions make room."""
    from koordweb.models import Job
    from scheduler.vocabulary import NVIDIA_GPU

    # 16 cores a pod: the load-aware filter (65% CPU, its estimate of the new pod included)
    # still takes a node whose evicted pods used 45% until its next report.
    requests = {"cpu": 16_000, "memory": 256 * GI, NVIDIA_GPU: 8}
    for k in range(count):
        job = _job(
            cluster,
            f"prod-{minute:02d}-{k}",
            "train",
            pods=4,
            requests=requests,
            priority="koord-prod",
            at=at,
        )
        if k % 3 == 0:
            Job.objects.filter(pk=job.pk).update(
                topology_spec={
                    "gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]
                }
            )


def _hot_nodes(cluster: Any) -> int:
    """Every 25th node's latest report says 80% CPU: above the load-aware threshold (65%)."""
    from django.db.models import Max

    from koordweb.models import NodeMetric

    names = list(cluster.nodes.order_by("name").values_list("pk", flat=True))[::25]
    latest = (
        NodeMetric.objects.filter(node_id__in=names)
        .values("node_id")
        .annotate(last=Max("id"))
        .values_list("last", flat=True)
    )
    return NodeMetric.objects.filter(id__in=list(latest)).update(
        usage={"cpu": 102_400, "memory": 400 * GI}
    )


def _minutes(world: World, t0: datetime, minutes: int) -> None:
    """One simulated minute at a time: arrivals, a round, koordlet reports, the GPU sample."""
    from koordweb.backends.simulated import SimulatedBackend
    from koordweb.backends.simulated_usage import node_metrics_report
    from koordweb.engine.pipeline import round_execute
    from koordweb.models import Round
    from koordweb.services.gpu_usage import gpu_samples_ingest

    cluster, backend = world.cluster, SimulatedBackend()
    spent = {"rounds_s": 0.0, "samples_s": 0.0}
    for minute in range(minutes + 1):
        at = t0 + timedelta(minutes=minute)
        if minute in WAVES:
            _wave(cluster, minute, max(2, world.gpu_nodes // GPU_NODES_PER_GANG), at)
        if minute == minutes:
            progress(f"{_hot_nodes(cluster)} nodes report 80% CPU before the last round")
        begun = time.perf_counter()
        round_execute(cluster=cluster, backend=backend, trigger=Round.Trigger.TIMER, now=at)
        spent["rounds_s"] += time.perf_counter() - begun
        begun = time.perf_counter()
        if minute < minutes:
            node_metrics_report(cluster, now=at + timedelta(seconds=30), interval=60)
            gpu_samples_ingest(cluster=cluster, now=at + timedelta(seconds=59))
        spent["samples_s"] += time.perf_counter() - begun
        if minute % 5 == 0 or minute == minutes:
            progress(f"minute {minute}/{minutes}: {_census(cluster)}")
    world.timings.update({k: round(v, 1) for k, v in spent.items()})


def _census(cluster: Any) -> str:
    from django.db.models import Count

    from koordweb.models import Job, Preemption

    states = dict(Job.objects.filter(cluster=cluster).values_list("state").annotate(n=Count("id")))
    preemptions = Preemption.objects.filter(cluster=cluster).count()
    return ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items())) + (
        f"; {preemptions} preemptions"
    )
