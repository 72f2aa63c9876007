"""Demo traffic for `make run`: a job arrives every few seconds, now and then a koord-prod one.

The shapes cycle deterministically so every demo shows the same story: batch work fills the
H800 blocks, Ascend and Cambricon jobs share their cards, and a production job that needs a whole
spine arrives and preempts lower-priority work.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Q

from koordweb.models import Cluster, Job, JobState
from koordweb.services.jobs import GatherRule, JobSpec, PodShape, job_submit
from scheduler.vocabulary import (
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    LABEL_GPU_VENDOR,
    NPU_CORE,
    NPU_CPU,
    NPU_DVPP,
    NVIDIA_GPU,
)

GI = 1024**3


@dataclass(frozen=True)
class Arrival:
    team: str
    user: str
    stem: str
    priority_class: str
    replicas: int
    requests: dict[str, int]
    gather: tuple[GatherRule, ...]
    duration_seconds: int
    # Koordinator's shared-card request is the same for every vendor: the vendor label says where.
    node_selector: tuple[tuple[str, str], ...] = ()


def _gpus(n: int) -> dict[str, int]:
    return {"cpu": 8000 * n, "memory": 64 * GI * n, NVIDIA_GPU: n}


BLOCK = (GatherRule("BlockLayer", "MustGather"),)
PREFER_BLOCK = (GatherRule("BlockLayer", "PreferGather"),)
SPINE = (GatherRule("SpineLayer", "MustGather"),)

ARRIVALS = (
    Arrival("team-vision", "alice", "resnet-ft", "koord-batch", 2, _gpus(8), PREFER_BLOCK, 90),
    Arrival("team-nlp", "bob", "llm-eval", "koord-free", 1, _gpus(1), (), 45),
    Arrival("team-speech", "carol", "wav2vec", "koord-batch", 4, _gpus(8), BLOCK, 120),
    Arrival("team-nlp", "bob", "moe-ablation", "koord-batch", 8, _gpus(8), BLOCK, 150),
    Arrival("team-vision", "alice", "sam-sweep", "koord-free", 6, _gpus(4), (), 60),
    Arrival("team-nlp", "bob", "prod-llm-refresh", "koord-prod", 16, _gpus(8), SPINE, 120),
    # Ascend 910B3 vNPUs (template vir10_4c_16g_m: 10 AI cores, 4 AI CPUs, 16 GiB) and whole
    # cards, in Koordinator's forms (gpu.shared + npu-core + npu-cpu + gpu-memory; npu-core +
    # gpu-memory-ratio).
    Arrival(
        "team-speech",
        "carol",
        "ascend-vnpu-infer",
        "koord-batch",
        6,
        {
            "cpu": 4000,
            "memory": 16 * GI,
            GPU_SHARED: 1,
            NPU_CORE: 10,
            NPU_CPU: 4,
            NPU_DVPP: 50,
            GPU_MEMORY: 16 * GI,
        },
        (),
        90,
    ),
    Arrival(
        "team-nlp",
        "bob",
        "ascend-train",
        "koord-batch",
        2,
        {
            "cpu": 32000,
            "memory": 256 * GI,
            NPU_CORE: 80,
            GPU_MEMORY_RATIO: 400,
        },
        PREFER_BLOCK,
        120,
    ),
    # Cambricon MLU370 dynamic sMLU slices: half a card's cores, 8 GiB each (Koordinator's form).
    Arrival(
        "team-vision",
        "alice",
        "mlu-smlu-serve",
        "koord-batch",
        5,
        {
            "cpu": 2000,
            "memory": 8 * GI,
            GPU_SHARED: 1,
            GPU_CORE: 50,
            GPU_MEMORY: 8 * GI,
        },
        (),
        75,
        ((LABEL_GPU_VENDOR, "cambricon"),),
    ),
)


def demo_arrival(*, cluster: Cluster, limit_active: int = 40) -> Job | None:
    """Submit the next demo job; nothing when the demo already has `limit_active` jobs waiting."""
    active = cluster.jobs.filter(state__in=[JobState.PENDING, JobState.SCHEDULED])
    if active.count() >= limit_active:
        return None
    sequence = cluster.jobs.filter(Q(name__startswith="demo-")).count()
    arrival = ARRIVALS[sequence % len(ARRIVALS)]
    user = get_user_model().objects.filter(username=arrival.user).first()
    spec = JobSpec(
        name=f"demo-{arrival.stem}-{sequence + 1}",
        namespace=arrival.team,
        cluster=cluster.name,
        quota=arrival.team,
        priority_class=arrival.priority_class,
        replicas=arrival.replicas,
        pod=PodShape(requests=dict(arrival.requests), node_selector=dict(arrival.node_selector)),
        gather=arrival.gather,
        duration_seconds=arrival.duration_seconds,
    )
    try:
        job, _ = job_submit(user=user, spec=spec)
    except ValidationError:
        return None
    return job
