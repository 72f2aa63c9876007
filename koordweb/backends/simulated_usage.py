"""The simulated koordlet: per-card GPU usage reports (NodeMetric rows) for the simulated cluster.

Every running job has a utilisation profile, named by its `sim.koordweb.io/gpu-profile`
annotation or picked from its name (stable across restarts):
- `training`: steady, 85-98% busy, memory mostly full;
- `dataloader`: bound by its input pipeline, busy swings between about 25% and 65%;
- `crashed`: busy for its first minutes, then 0% (the process died, the pod still holds the card);
- `notebook`: an interactive notebook left open: a model in memory, the cards idle.
A report names every gpu card of a node (`nodeUsage.devices`) and every holder's own use of it
(`podsMetric[].podUsage.devices`), as koordlet does, so ingest attributes shared cards exactly.
It also lists every running pod of the node with its own cpu and memory use
(`podsMetric[].podUsage.resources`, kept in `pod_usages`), whose sum is the node's use:
Koordinator's load-aware plugin adds an estimate only for bound pods a report does not list (or
that were bound within its last interval), so a report without them would count every pod twice.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from datetime import datetime

from koordweb.device_allocated import card_share_percent, parse_device_allocation
from koordweb.models import Cluster, Device, Job, JobState, NodeMetric, Pod
from scheduler.vocabulary import (
    ANNOTATION_DEVICE_ALLOCATED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_PROFILE_ANNOTATION,
)

PROFILE_ANNOTATION = GPU_PROFILE_ANNOTATION
PROFILES = ("training", "dataloader", "crashed", "notebook")
# A running pod's cpu and memory use, as a share of its requests (the node's use is their sum).
USAGE_FACTORS = (("cpu", 0.6), ("memory", 0.5))
# Picked from a job's name when it names no profile: mostly training, some input-bound, a crash.
DEFAULT_MIX = ("training",) * 6 + ("dataloader",) * 3 + ("crashed",)
CRASH_AFTER_SECONDS = 180


def _noise(*parts: object) -> float:
    """A stable pseudo-random number in [0, 1) for these parts."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") / 2**32


def job_profile(job: Job) -> str:
    named = (job.annotations or {}).get(PROFILE_ANNOTATION, "")
    if named in PROFILES:
        return named
    return DEFAULT_MIX[int(_noise(job.namespace, job.name) * len(DEFAULT_MIX))]


def busy_percent(profile: str, *, running_seconds: float, pod: str, minor: int) -> int:
    """How busy a card held by a pod of this profile is, `running_seconds` after the job began."""
    minute = int(running_seconds // 60)
    jitter = _noise(pod, minor, minute)
    if profile == "training":
        return int(85 + 13 * jitter)
    if profile == "dataloader":
        wave = (minute % 6) / 5  # a slow saw: the input queue fills and drains
        return int(25 + 40 * wave * (0.7 + 0.3 * jitter))
    if profile == "crashed":
        return int(80 + 15 * jitter) if running_seconds < CRASH_AFTER_SECONDS else 0
    return 1 if jitter > 0.9 else 0  # notebook


def memory_fraction(profile: str, *, running_seconds: float) -> float:
    if profile == "training":
        return 0.88
    if profile == "dataloader":
        return 0.55
    if profile == "crashed":
        return 0.7 if running_seconds < CRASH_AFTER_SECONDS else 0.0
    return 0.12


def node_metrics_report(cluster: Cluster, *, now: datetime, interval: int = 60) -> int:
    """Write one NodeMetric per gpu node, at most once per `interval`; returns rows written.

    Each running pod uses its requests times 0.6 (cpu) and 0.5 (memory), listed per pod
    (`pod_usages`, "namespace/name" -> usage) and summed into the node's usage."""
    newest = NodeMetric.objects.filter(node__cluster=cluster).order_by("-reported_at").first()
    if newest is not None and (now - newest.reported_at).total_seconds() < interval:
        return 0
    cards: dict[int, dict[int, int]] = defaultdict(dict)  # node -> minor -> memory bytes
    for node_id, minor, resources in Device.objects.filter(
        node__cluster=cluster, device_type=Device.Type.GPU
    ).values_list("node_id", "minor", "resources"):
        cards[node_id][minor] = int((resources or {}).get(GPU_MEMORY, 0))
    node_cards: dict[int, dict[int, list[int]]] = {
        node: {minor: [0, 0] for minor in minors} for node, minors in cards.items()
    }
    pod_cards: dict[int, dict[str, dict[str, dict[str, int]]]] = defaultdict(dict)
    node_usage: dict[int, dict[str, int]] = defaultdict(lambda: {"cpu": 0, "memory": 0})
    pod_usages: dict[int, dict[str, dict[str, int]]] = defaultdict(dict)
    pods = Pod.objects.filter(
        cluster=cluster, node_id__in=list(cards), job__state__in=JobState.HOLDING
    ).select_related("job")
    for pod in pods:
        running = (now - (pod.job.started_at or pod.started_at or now)).total_seconds()
        if pod.phase != "Running" or pod.node_id is None:
            continue
        profile = job_profile(pod.job)
        key = f"{pod.namespace}/{pod.name}"
        usage = {r: int((pod.requests or {}).get(r, 0) * f) for r, f in USAGE_FACTORS}
        pod_usages[pod.node_id][key] = usage
        for resource, amount in usage.items():
            node_usage[pod.node_id][resource] += amount
        for device_type, minor, resources in parse_device_allocation(
            (pod.annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED)
        ):
            totals = node_cards.get(pod.node_id, {}).get(minor)
            share = card_share_percent(resources)
            if device_type != "gpu" or totals is None or share <= 0:
                continue
            card_memory = cards[pod.node_id][minor]
            busy = busy_percent(profile, running_seconds=running, pod=key, minor=minor)
            busy = busy * share // 100
            memory = int(
                card_memory * share / 100 * memory_fraction(profile, running_seconds=running)
            )
            totals[0] = min(100, totals[0] + busy)
            totals[1] += memory
            pod_cards[pod.node_id].setdefault(key, {})[str(minor)] = {
                GPU_CORE: busy,
                GPU_MEMORY: memory,
            }
    rows = []
    for node_id, minors in node_cards.items():
        gpu_usage = {
            str(minor): {
                GPU_CORE: busy,
                GPU_MEMORY: memory,
                GPU_MEMORY_RATIO: 100 * memory // max(cards[node_id][minor], 1),
            }
            for minor, (busy, memory) in minors.items()
        }
        rows.append(
            NodeMetric(
                node_id=node_id,
                reported_at=now,
                report_interval_seconds=interval,
                usage=dict(node_usage.get(node_id, {"cpu": 0, "memory": 0})),
                gpu_usage=gpu_usage,
                pod_usages=pod_usages.get(node_id, {}),
                pod_gpu_usage=pod_cards.get(node_id, {}),
            )
        )
    NodeMetric.objects.bulk_create(rows, batch_size=2000)
    return len(rows)
