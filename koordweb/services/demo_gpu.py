"""The demo's GPU usage story: utilisation profiles on the seeded jobs, a notebook left idle for
hours, and a day of history from finished jobs, so `make run` shows idle and busy cards, an
efficiency ranking and a flagged idle job from the first minute.

History is written through the same row builder and recorder as live ingest
(koordweb.services.gpu_usage), from the simulated koordlet's profiles
(koordweb.backends.simulated_usage).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings

from koordweb.backends.simulated_usage import PROFILE_ANNOTATION, busy_percent
from koordweb.models import Cluster, ElasticQuota, Job, JobState, Node, Pod, PodPhase
from koordweb.models.gpu_usage import epoch
from koordweb.services.gpu_usage import CardReport, Holder, SampleRow, card_rows, samples_record
from scheduler.vocabulary import (
    ANNOTATION_DEVICE_ALLOCATED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    LABEL_GPU_MODEL,
    NPU_CORE,
    NVIDIA_GPU,
    QUOTA_NAME,
)

GI = 1024**3
SEEDED_PROFILES = {"vit-pretrain": "training", "llm-sft": "dataloader", "asr-finetune": "crashed"}
NOTEBOOK_HOURS = 5
# Finished jobs of the last day: (team, name, profile, cards, hours run, hours since it ended).
PAST_JOBS = (
    ("team-vision", "vision-ablation", "training", 8, 8, 10),
    ("team-nlp", "nightly-eval", "dataloader", 8, 6, 2),
    ("team-speech", "speech-sweep", "crashed", 4, 3, 5),
)


def demo_gpu_seed(cluster: Cluster, *, now: datetime) -> None:
    """Profiles on the running demo jobs, the idle notebook, and the past day's history."""
    for job in cluster.jobs.filter(name__in=list(SEEDED_PROFILES)):
        job.annotations = {**job.annotations, PROFILE_ANNOTATION: SEEDED_PROFILES[job.name]}
        job.save(update_fields=["annotations"])
    quotas = {q.name: q for q in cluster.quotas.all()}
    by_vendor: dict[str, list[Node]] = defaultdict(list)
    for node in cluster.nodes.order_by("name"):
        by_vendor[node.labels.get(LABEL_GPU_MODEL, "")].append(node)
    notebook_node = next(iter(by_vendor.get("Ascend-910B3", [])), None)
    step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
    end = epoch(now) // step * step
    periods: dict[int, list[SampleRow]] = defaultdict(list)
    if notebook_node is not None:
        notebook = _notebook(cluster, quotas["team-vision"], notebook_node, now)
        _history(
            periods, notebook, "notebook", [(notebook_node, 0)], end - NOTEBOOK_HOURS * 3600, end
        )
    nodes = by_vendor["H800"][-4:]
    for team, name, profile, cards, ran, ended in PAST_JOBS:
        job = _past_job(cluster, quotas[team], name, cards, now, ran, ended)
        held = [(nodes[i // 8 % len(nodes)], i % 8) for i in range(cards)]
        stop = end - ended * 3600
        _history(periods, job, profile, held, stop - ran * 3600, stop)
    samples_record(periods=sorted(periods.items()), step=step)
    Cluster.objects.filter(id=cluster.id).update(gpu_sampled_until=end)


def _history(
    periods: dict[int, list[SampleRow]],
    job: Job,
    profile: str,
    cards: list[tuple[Node, int]],
    start: int,
    stop: int,
) -> None:
    step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
    holder = Holder(f"{job.namespace}/{job.name}-0", job.id, job.quota_id, 100)
    for period in range(start - start % step, stop, step):
        for node, minor in cards:
            busy = busy_percent(
                profile, running_seconds=period - start, pod=holder.pod, minor=minor
            )
            report = CardReport(node.id, minor, busy, 8 * GI if busy else GI, {})
            periods[period].extend(
                card_rows(
                    report,
                    [holder],
                    start=period,
                    step=step,
                    idle_percent=settings.KOORDWEB_GPU_IDLE_PERCENT,
                )
            )


def _notebook(cluster: Cluster, quota: ElasticQuota, node: Node, now: datetime) -> Job:
    started = now - timedelta(hours=NOTEBOOK_HOURS)
    batch = cluster.priority_classes.filter(name="koord-batch").first()
    job = Job.objects.create(
        cluster=cluster,
        namespace=quota.name,
        name="jupyter-notebook",
        kind=Job.Kind.POD,
        quota=quota,
        priority_class=batch,
        priority=batch.value if batch else 0,
        state=JobState.RUNNING,
        submitted_at=started,
        scheduled_at=started,
        started_at=started,
        annotations={PROFILE_ANNOTATION: "notebook"},
    )
    card = {
        "minor": 0,
        "resources": {
            GPU_CORE: "100",
            GPU_MEMORY: str(64 * GI),
            GPU_MEMORY_RATIO: "100",
            NPU_CORE: "20",
        },
    }
    Pod.objects.create(
        cluster=cluster,
        job=job,
        namespace=job.namespace,
        name="jupyter-notebook-0",
        requests={"cpu": 4000, "memory": 32 * GI, NPU_CORE: 20},
        labels={QUOTA_NAME: quota.name},
        annotations={
            ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": [card]}, separators=(",", ":")),
            NPU_CORE: "0",
        },
        priority=job.priority,
        priority_class_name=batch.name if batch else "",
        node=node,
        phase=PodPhase.RUNNING,
        created_at=started,
        bound_at=started,
        started_at=started,
    )
    return job


def _past_job(
    cluster: Cluster,
    quota: ElasticQuota,
    name: str,
    cards: int,
    now: datetime,
    ran: int,
    ended: int,
) -> Job:
    finished = now - timedelta(hours=ended)
    started = finished - timedelta(hours=ran)
    job = Job.objects.create(
        cluster=cluster,
        namespace=quota.name,
        name=name,
        quota=quota,
        state=JobState.SUCCEEDED,
        state_reason="finished (demo history)",
        submitted_at=started,
        scheduled_at=started,
        started_at=started,
        finished_at=finished,
    )
    Pod.objects.create(
        cluster=cluster,
        job=job,
        namespace=job.namespace,
        name=f"{name}-0",
        requests={"cpu": 8000 * cards, "memory": 64 * GI * cards, NVIDIA_GPU: cards},
        phase=PodPhase.SUCCEEDED,
        created_at=started,
        started_at=started,
        finished_at=finished,
    )
    return job
