"""Hypothesis strategies for whole scheduling stories: a cluster and the waves of jobs that
arrive before each round.

Every feature is mixed in: 2-20 nodes with taints of every effect, cordons and labels (a zone,
a disk, a numeric generation for Gt/Lt, spine and block); some nodes with eight GPUs and their
Device inventory (an H100 partition table under the Honor policy on some); running pods (some
protected, some holding cards, some terminating); two flat elastic quotas; gangs whose members
ask for the same resources but differ in tolerations, node affinity and nodeSelector (a launcher
beside its workers), with every affinity operator; priorities that make later waves preempt
earlier pods.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import strategies as st

from scheduler import ClusterSnapshot
from scheduler.devices import AllocatedDevice, render_device_allocated
from scheduler.devices.names import (
    ANNOTATION_DEVICE_ALLOCATED,
    GPU_CORE,
    GPU_MEMORY_RATIO,
    LABEL_GPU_MODEL,
    LABEL_PARTITION_POLICY,
)
from scheduler.model import (
    GangInfo,
    JobInfo,
    LayerGather,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    QuotaInfo,
    Taint,
    Toleration,
    TopologyRule,
)
from scheduler.vocabulary import LABEL_DISABLE_PREEMPTIBLE, NVIDIA_GPU
from tests.scheduler.builders import BLOCK_LABEL, SPINE_BLOCK, SPINE_LABEL
from tests.scheduler.devices.builders import GiB, eight_gpu_node

ZONE, DISK, GEN = "zone", "disk", "gen"
ZONES = ("a", "b", "c")
DISKS = ("ssd", "hdd")
TAINT_KEYS = ("dedicated", "spot", "maintenance")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
CORDON_KEY = "node.kubernetes.io/unschedulable"
CARD = 80 * GiB


@dataclass(frozen=True)
class Wave:
    """Jobs (and their pods) submitted before one round."""

    jobs: tuple[JobInfo, ...]
    pods: tuple[PodInfo, ...]


@dataclass(frozen=True)
class Story:
    """A cluster and the waves that arrive: wave i is submitted before round i + 1."""

    snapshot: ClusterSnapshot
    waves: tuple[Wave, ...]


def submitted(snapshot: ClusterSnapshot, wave: Wave) -> ClusterSnapshot:
    return replace(snapshot, jobs=snapshot.jobs + wave.jobs, pods=snapshot.pods + wave.pods)


@st.composite
def taints(draw: st.DrawFn) -> tuple[Taint, ...]:
    count = draw(st.sampled_from([0, 0, 1, 1, 2]))
    found = {}
    for _ in range(count):
        key = draw(st.sampled_from(TAINT_KEYS))
        effect = draw(st.sampled_from(EFFECTS))
        found[key, effect] = Taint(key, draw(st.sampled_from(["", "x", "y"])), effect)
    return tuple(found.values())


@st.composite
def nodes(draw: st.DrawFn, index: int) -> NodeInfo:
    name = f"n{index}"
    labels: dict[str, str] = {}
    if draw(st.integers(0, 3)):
        labels[ZONE] = draw(st.sampled_from(ZONES))
    if draw(st.booleans()):
        labels[DISK] = draw(st.sampled_from(DISKS))
    if draw(st.integers(0, 3)):
        labels[GEN] = draw(st.sampled_from(["1", "2", "3", "4", "5", "x"]))
    if draw(st.integers(0, 4)):
        labels[SPINE_LABEL] = f"s{index % 2}"
        if draw(st.integers(0, 4)):
            labels[BLOCK_LABEL] = f"b{index % 4}"
    allocatable = {
        "cpu": draw(st.sampled_from([4, 8, 16])) * 1000,
        "memory": draw(st.sampled_from([16, 32])) * GiB,
    }
    pods = draw(st.sampled_from([None, 3, 110]))
    if pods is not None:
        allocatable["pods"] = pods
    devices = None
    if draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            labels[LABEL_GPU_MODEL] = "H100"
            labels[LABEL_PARTITION_POLICY] = draw(st.sampled_from(["Honor", "Prefer"]))
        allocatable |= {NVIDIA_GPU: 8, GPU_CORE: 800, GPU_MEMORY_RATIO: 800}
        devices = eight_gpu_node(name, labels=dict(labels))
    return NodeInfo(
        name,
        allocatable,
        labels,
        taints=draw(taints()),
        unschedulable=draw(st.integers(0, 5)) == 0,
        devices=devices,
    )


@st.composite
def tolerations(draw: st.DrawFn) -> tuple[Toleration, ...]:
    found = []
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        kind = draw(st.sampled_from(["all", "key", "equal", "equal", "cordon"]))
        effect = draw(st.sampled_from(["", *EFFECTS]))
        if kind == "all":
            found.append(Toleration("", "Exists", "", effect))
        elif kind == "key":
            found.append(Toleration(draw(st.sampled_from(TAINT_KEYS)), "Exists", "", effect))
        elif kind == "equal":
            key, value = draw(st.sampled_from(TAINT_KEYS)), draw(st.sampled_from(["", "x"]))
            found.append(Toleration(key, "Equal", value, effect))
        else:
            found.append(Toleration(CORDON_KEY, "Exists", "", "NoSchedule"))
    return tuple(found)


@st.composite
def requirements(draw: st.DrawFn) -> NodeSelectorRequirement:
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    if op in ("Gt", "Lt"):
        return NodeSelectorRequirement(GEN, op, (draw(st.sampled_from(["1", "2", "3", "4"])),))
    key = draw(st.sampled_from([ZONE, DISK, GEN]))
    if op in ("Exists", "DoesNotExist"):
        return NodeSelectorRequirement(key, op)
    pool = {ZONE: ZONES, DISK: DISKS, GEN: ("1", "2", "3")}[key]
    values = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique=True))
    return NodeSelectorRequirement(key, op, tuple(values))


@st.composite
def affinities(draw: st.DrawFn) -> tuple[NodeSelectorTerm, ...]:
    terms = draw(st.sampled_from([0, 0, 1, 1, 2]))
    return tuple(
        NodeSelectorTerm(tuple(draw(st.lists(requirements(), min_size=1, max_size=2))))
        for _ in range(terms)
    )


@st.composite
def selectors(draw: st.DrawFn) -> dict[str, str]:
    choice = draw(st.sampled_from(["none", "none", "zone", "disk"]))
    if choice == "zone":
        return {ZONE: draw(st.sampled_from(ZONES))}
    if choice == "disk":
        return {DISK: draw(st.sampled_from(DISKS))}
    return {}


@st.composite
def constraints(draw: st.DrawFn) -> dict[str, object]:
    """What may differ between members of one gang: where each may go."""
    return {
        "tolerations": draw(tolerations()),
        "required_affinity": draw(affinities()),
        "node_selector": draw(selectors()),
    }


@st.composite
def gangs(
    draw: st.DrawFn, name: str, priority: st.SearchStrategy[int], quotas: tuple[str, ...] = ()
) -> Wave:
    namespace, short = name.split("/")
    count = draw(st.integers(1, 4))
    min_available = draw(st.integers(1, count))
    mode = draw(st.sampled_from(["Strict", "Strict", "NonStrict"]))
    prio = draw(priority)
    quota = draw(st.sampled_from([None, *quotas]))
    requests = {
        "cpu": draw(st.sampled_from([1, 2, 4])) * 1000,
        "memory": draw(st.sampled_from([1, 4])) * GiB,
    }
    gpus = draw(st.sampled_from([0, 0, 0, 1, 2]))
    if gpus:
        requests[NVIDIA_GPU] = gpus
    workers = draw(constraints())
    launcher = draw(constraints()) if draw(st.booleans()) else workers
    pods = tuple(
        PodInfo(
            namespace=namespace,
            name=f"{short}-{i}",
            job_id=name,
            requests=dict(requests),
            priority=prio,
            quota=quota,
            gang_id=name,
            **(launcher if i == 1 else workers),  # type: ignore[arg-type]
        )
        for i in range(1, count + 1)
    )
    layer = draw(st.sampled_from([None, None, "BlockLayer", "SpineLayer"]))
    rule = TopologyRule((LayerGather(layer, "MustGather"),)) if layer else None
    job = JobInfo(
        id=name,
        pod_keys=tuple(p.key for p in pods),
        gangs=(GangInfo(name, min_available, count, mode),),  # type: ignore[arg-type]
        priority=prio,
        quota=quota,
        topology=rule,
    )
    return Wave((job,), pods)


@st.composite
def running(
    draw: st.DrawFn, cluster: list[NodeInfo], quotas: tuple[str, ...] = ()
) -> tuple[PodInfo, ...]:
    """Pods already bound, fitting their nodes (cards recorded in their annotation)."""
    free = {n.name: dict(n.allocatable) for n in cluster}
    cards = {n.name: list(range(8)) for n in cluster if n.devices is not None}
    pods = []
    for j in range(draw(st.integers(0, 14))):
        target = draw(st.sampled_from(cluster)).name
        cpu = draw(st.sampled_from([1, 2, 4, 8])) * 1000
        gpus = draw(st.sampled_from([0, 0, 1, 2])) if target in cards else 0
        room = free[target]
        if room["cpu"] < cpu or room.get("pods", 1) < 1 or len(cards.get(target, ())) < gpus:
            continue
        room["cpu"] -= cpu
        if "pods" in room:
            room["pods"] -= 1
        requests = {"cpu": cpu}
        annotations = {}
        if gpus:
            held = [cards[target].pop(0) for _ in range(gpus)]
            requests[NVIDIA_GPU] = gpus
            allocated = [AllocatedDevice("gpu", m, 100, CARD, 100) for m in held]
            annotations[ANNOTATION_DEVICE_ALLOCATED] = render_device_allocated(allocated)
        protected = draw(st.integers(0, 5)) == 0
        pods.append(
            PodInfo(
                namespace="batch",
                name=f"run-{j}",
                job_id=f"batch/run-{j // 2}",
                requests=requests,
                labels={LABEL_DISABLE_PREEMPTIBLE: "true"} if protected else {},
                annotations=annotations,
                priority=draw(st.integers(0, 3)),
                node=target,
                phase="Running",
                terminating=draw(st.integers(0, 7)) == 0,  # still holding its room
                quota=draw(st.sampled_from([None, *quotas])),
            )
        )
    return tuple(pods)


@st.composite
def stories(draw: st.DrawFn, min_nodes: int = 2, max_nodes: int = 20) -> Story:
    cluster = [draw(nodes(i)) for i in range(draw(st.integers(min_nodes, max_nodes)))]
    quotas: tuple[QuotaInfo, ...] = ()
    if draw(st.booleans()):
        quotas = (
            QuotaInfo("qa", {"cpu": 8000}, {"cpu": 32000}),
            QuotaInfo("qb", {"cpu": 4000}, {"cpu": 64000}),
        )
    waves = []
    serial = 0
    # Earlier waves run low, later ones higher: they preempt what came first.
    for low, high in ((0, 3), (2, 6), (0, 8)):
        jobs: list[JobInfo] = []
        pods: list[PodInfo] = []
        for _ in range(draw(st.integers(0 if waves else 1, 4))):
            serial += 1
            names = tuple(q.name for q in quotas)
            wave = draw(gangs(f"ml/g{serial}", st.integers(low, high), names))
            jobs += wave.jobs
            pods += wave.pods
        waves.append(Wave(tuple(jobs), tuple(pods)))
    snapshot = ClusterSnapshot(
        tuple(cluster),
        draw(running(cluster, tuple(q.name for q in quotas))),
        (),
        quotas,
        (),
        topology=SPINE_BLOCK,
    )
    return Story(snapshot, tuple(waves))
