"""Reads for the preemption ledger: who preempted whom, why, and what it cost.

GPUs freed are counted from each victim's `freed` resources; GPU-hours lost is the victim's
GPUs times how long it had run when it was preempted (the work thrown away), unless the round
recorded its own figure in the preemption's `cost`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, Q, QuerySet

from koordweb.models import Cluster, Job, Preemption, PreemptionVictim
from koordweb.selectors.redaction import preemption_cost_unnamed
from koordweb.selectors.tenancy import preemptions_visible, quotas_of_member, user_is_admin
from scheduler.vocabulary import CAMBRICON_MLU, GPU_CORE, HUAWEI_NPU, NVIDIA_GPU, natural_key

# What a tenant reads in place of another team's job name.
OTHER_TEAMS_JOB = "another team's job"
# The whole-card resources a victim's GPUs are counted from (the ledger counts accelerators).
COUNTED_CARDS = (NVIDIA_GPU, HUAWEI_NPU, CAMBRICON_MLU)


def gpu_count(resources: Mapping[str, Any]) -> float:
    """Cards in a resource list: whole cards, or gpu-core percent / 100 for shared requests."""
    whole = sum(int(resources.get(name, 0)) for name in COUNTED_CARDS)
    if whole:
        return float(whole)
    return int(resources.get(GPU_CORE, 0)) / 100


@dataclass
class VictimRow:
    job_id: int | None  # None: another team's job, counted but not named (a tenant's view)
    job: str
    quota: str
    started_at: datetime | None
    pods: list[str]
    gpus_freed: float
    gpu_hours_lost: float
    pod_count: int = 0


@dataclass
class PreemptionRow:
    id: int
    at: datetime
    preemptor_id: int
    preemptor: str
    quota: str
    state: str
    reason: str
    cost: dict[str, Any]
    round_id: int | None
    nominations: dict[str, Any]
    victims: list[VictimRow] = field(default_factory=list)
    preemptor_visible: bool = True  # False: another team's job (a tenant's view), not linked
    outcome: str = "waiting"  # `Preemption.Outcome`: what became of the preemptor
    outcome_text: str = ""  # the outcome in words ("started on its nominated nodes")
    outcome_reason: str = ""
    outcome_at: datetime | None = None
    attempt: int = 1  # the preemptor's first, second, ... preemption
    round_number: int | None = None  # the round's number in its cluster (`Round.number`)

    @property
    def nominated_nodes(self) -> list[str]:
        """The nodes its pods were nominated to, each once, in natural order."""
        return sorted({str(node) for node in self.nominations.values()}, key=natural_key)

    @property
    def pods_evicted(self) -> int:
        return sum(v.pod_count for v in self.victims)

    @property
    def gpus_freed(self) -> float:
        return round(sum(v.gpus_freed for v in self.victims), 2)

    @property
    def gpu_hours_lost(self) -> float:
        recorded = self.cost.get("gpu_hours_lost")
        if isinstance(recorded, int | float):
            return float(recorded)
        return round(sum(v.gpu_hours_lost for v in self.victims), 2)


def _victim_row(victim: PreemptionVictim, at: datetime) -> VictimRow:
    job = victim.job
    gpus = gpu_count(victim.freed or {})
    ran = (at - job.started_at).total_seconds() / 3600 if job.started_at else 0.0
    pods = [str(p) for p in victim.pods or []]
    return VictimRow(
        job.pk,
        str(job),
        job.quota.name if job.quota else "",
        job.started_at,
        pods,
        gpus,
        round(gpus * max(ran, 0.0), 2),
        len(pods),
    )


def _unnamed(row: VictimRow) -> VictimRow:
    """Another team's victim for a tenant: its GPUs and pods counted, its name, quota, pods and
    start left out."""
    return VictimRow(
        None, OTHER_TEAMS_JOB, "", None, [], row.gpus_freed, row.gpu_hours_lost, row.pod_count
    )


def _row(item: Preemption, visible_quotas: set[int] | None = None) -> PreemptionRow:
    """One preemption; with `visible_quotas` (a tenant), other tenants' victims are counted but
    not named, and another team's preemptor is shown without its name, quota or nominations."""
    preemptor = item.preemptor
    own = visible_quotas is None or preemptor.quota_id in visible_quotas
    return PreemptionRow(
        item.pk,
        item.created_at,
        preemptor.pk,
        str(preemptor) if own else OTHER_TEAMS_JOB,
        (preemptor.quota.name if preemptor.quota else "") if own else "",
        item.state,
        item.reason,
        dict(item.cost or {}) if own else preemption_cost_unnamed(item.cost),
        item.round_id,
        dict(item.nominations or {}) if own else {},
        [
            row if visible_quotas is None or v.job.quota_id in visible_quotas else _unnamed(row)
            for v in item.victims.all()
            if (row := _victim_row(v, item.created_at))
        ],
        preemptor_visible=own,
        outcome=item.outcome,
        outcome_text=item.get_outcome_display(),
        outcome_reason=item.outcome_reason,
        outcome_at=item.outcome_at,
        attempt=item.attempt,
        round_number=item.round.number_shown if item.round is not None else None,
    )


def _visible_quotas(user: Any) -> set[int] | None:
    if user_is_admin(user):
        return None
    return set(quotas_of_member(user=user).values_list("id", flat=True))


def _queryset(cluster: Cluster, user: Any) -> QuerySet[Preemption]:
    victims = PreemptionVictim.objects.select_related("job__quota").order_by("job__name")
    items = (
        Preemption.objects.filter(cluster=cluster)
        .select_related("preemptor__quota", "round")
        .prefetch_related(Prefetch("victims", queryset=victims))
    )
    if not user_is_admin(user):
        # A tenant sees a preemption when one of its jobs preempted or was preempted.
        items = items.filter(pk__in=preemptions_visible(user=user).values("pk"))
    return items


def preemption_list(
    cluster: Cluster,
    *,
    user: Any,
    quota: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
    round_id: int | None = None,
    limit: int = 200,
) -> tuple[list[PreemptionRow], int]:
    """The newest preemptions the user may see, filtered by tenant quota, time and round, and
    how many there are in all (the list stops at `limit`)."""
    items = _queryset(cluster, user)
    if round_id is not None:
        items = items.filter(round_id=round_id)
    if quota:
        items = items.filter(Q(preemptor__quota__name=quota) | Q(victims__job__quota__name=quota))
        items = items.distinct()
    if since:
        items = items.filter(created_at__gte=since)
    if until:
        items = items.filter(created_at__lte=until)
    visible = _visible_quotas(user)
    rows = [_row(item, visible) for item in items.order_by("-created_at", "-id")[:limit]]
    return rows, items.count()


def preemption_cluster(pk: int) -> Cluster | None:
    """The cluster a preemption belongs to (its page shows that cluster)."""
    found = Preemption.objects.filter(pk=pk).select_related("cluster").first()
    return found.cluster if found else None


def preemption_detail(cluster: Cluster, pk: int, *, user: Any) -> PreemptionRow | None:
    """One preemption, or None when it is absent or the user may not see it."""
    item = _queryset(cluster, user).filter(pk=pk).first()
    return _row(item, _visible_quotas(user)) if item else None


@dataclass
class JobPreemptionHistory:
    """A job's preemptions, oldest first: those it made (its first, second, ... attempt, each
    with its outcome) and those that made it a victim."""

    made: list[PreemptionRow]
    suffered: list[PreemptionRow]


def job_preemption_history(job: Job, *, user: Any, limit: int = 50) -> JobPreemptionHistory:
    """The job page's preemption history (the newest `limit` of each kind, oldest first), named
    as the user may see them: a tenant reads another team's jobs as "another team's job"."""
    victims = PreemptionVictim.objects.select_related("job__quota").order_by("job__name")
    items = Preemption.objects.select_related("preemptor__quota", "round").prefetch_related(
        Prefetch("victims", queryset=victims)
    )
    visible = _visible_quotas(user)

    def oldest_first(rows: QuerySet[Preemption]) -> list[PreemptionRow]:
        newest = rows.order_by("-created_at", "-id")[:limit]
        return [_row(item, visible) for item in reversed(list(newest))]

    return JobPreemptionHistory(
        made=oldest_first(items.filter(preemptor=job)),
        suffered=oldest_first(items.filter(victims__job=job).distinct()),
    )
