"""What-if on the engine: one round on the live state with a hypothetical job added, never written.

The live cluster is read into a snapshot exactly as a round reads it, and the jobs the cluster's
last round left out as backed off are left out too (`backoff.py`: they could not be placed and
nothing has changed for them, so they take no room): never more work than the cluster's own
round, however much a tenant has parked. The hypothetical job becomes an engine job by the rule
every stored job follows (`snapshot.engine_job_info`, `snapshot.pod_info`).

The held jobs are left out at the query (`whatif_snapshot`), so a what-if reads and builds only
what the round plans: their rows are not read at all while they are still all waiting (no pod
bound, nominated or past Pending) and leaving them out still changes no quota's capped demand;
otherwise every row is read and the held jobs are taken out of the built snapshot.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import Q

from koordweb.engine import assembly, cluster_rows
from koordweb.engine import snapshot as snapshot_adapter
from koordweb.engine.backoff import backoff_held, left_out_is_neutral, snapshot_without
from koordweb.engine.profile import engine_profile
from koordweb.engine.reads import cluster_read_kept
from koordweb.models import Cluster, Job, Pod, PodPhase
from scheduler.api import RoundResult, plan_round
from scheduler.model import ClusterSnapshot
from scheduler.vocabulary import FINISHED_POD_PHASES


@dataclass(frozen=True)
class WhatIf:
    """The engine's round with the hypothetical job: its engine id and pod keys, and the result."""

    job_id: str
    pod_keys: tuple[str, ...]
    result: RoundResult


def whatif_snapshot(cluster: Cluster, *, now: datetime) -> ClusterSnapshot:
    """The live state a what-if plans on: the cluster's snapshot without the jobs its last round
    held back; the pages' shared one (`reads.py`) when nothing changed since it was read, else
    read without the held rows when that is the same snapshot (see the module's docstring), else
    read whole and the held jobs taken out."""
    held = backoff_held(cluster.id)
    kept = cluster_read_kept(cluster)  # the pages' shared state, when nothing changed since
    if kept is not None:
        return snapshot_without(replace(kept.snapshot, now=now.timestamp()), held.jobs)
    if held.rows and _all_waiting(held.rows):
        live, _ = assembly.build_for_round(cluster, now=now, without_jobs=held.rows)
        if not any(j.id in held.jobs for j in live.jobs) and left_out_is_neutral(
            live, held.touches
        ):
            return live
    live, _ = assembly.build_for_round(cluster, now=now)
    return snapshot_without(live, held.jobs)


def _all_waiting(job_ids: Collection[int]) -> bool:
    """No pod of those jobs holds or is promised a node or is past Pending (finished ones
    aside): the round would leave them out whole."""
    return not (
        Pod.objects.filter(job__id__any=list(job_ids))
        .exclude(phase__in=FINISHED_POD_PHASES)
        .filter(
            Q(node__isnull=False) | Q(nominated_node__isnull=False) | ~Q(phase=PodPhase.PENDING)
        )
        .exists()
    )


def whatif_plan(job: Job, pods: Sequence[Pod], *, now: datetime) -> WhatIf:
    """Plan one round of `job.cluster` with the unsaved `job` and its unsaved `pods` added."""
    cluster = job.cluster
    live = whatif_snapshot(cluster, now=now)
    quota = job.quota.name if job.quota is not None else None
    job_id = snapshot_adapter.engine_job_id(job)
    infos = tuple(snapshot_adapter.pod_info(pod, job_id, quota, job.gang_id) for pod in pods)
    row = cluster_rows.job_row_of(job)
    info = snapshot_adapter.engine_job_info(
        job_id,
        [row],
        tuple(p.key for p in infos),
        {job.quota_id: quota} if job.quota_id is not None and quota else {},
    )
    hypothetical = replace(live, pods=(*live.pods, *infos), jobs=(*live.jobs, info))
    return WhatIf(job_id, info.pod_keys, plan_round(hypothetical, engine_profile(cluster)))
