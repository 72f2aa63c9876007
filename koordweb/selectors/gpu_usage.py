"""Reads of GPU usage: cards now, a job's cards over its life, efficiency per job and team, and
the idle flags (koordweb.models.gpu_usage; written by koordweb.services.gpu_usage).

Amounts are card-seconds in hundredths of a card; everything here answers in GPU-hours and
percents. Waste is what was allocated and not used (allocated - used), in two parts that add up
to it: *idle* (held while the holder was idle, under KOORDWEB_GPU_IDLE_PERCENT busy) and
*underused* (the rest: busy, but short of the whole share). Used + idle + underused = allocated.
A job is *underused* over a window when its efficiency (used / allocated) is under its quota's
`gpu_efficiency_threshold_percent`. The efficiency ranking reads the per-job hour sums only,
never the card samples, so it costs the same at 50 nodes and at 5,000.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import (
    BigIntegerField,
    Count,
    ExpressionWrapper,
    F,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
)
from django.utils import timezone

from koordweb.models import (
    CARD_HOUR,
    CardSample,
    Cluster,
    ElasticQuota,
    Job,
    JobGpuState,
    JobState,
    JobUsageHour,
)
from koordweb.models.gpu_usage import epoch, from_epoch
from koordweb.selectors.card_tallies import cluster_cards
from koordweb.selectors.tenancy import quotas_of_member, user_is_admin

DEFAULT_IDLE_MINUTES = 60
DEFAULT_EFFICIENCY_PERCENT = 50


@dataclass(frozen=True)
class CardNow:
    """A card in the last sampled period."""

    busy_pct: int
    memory_mib: int


@dataclass(frozen=True)
class GpuHours:
    allocated: float
    used: float
    idle_allocated: float
    efficiency_pct: float  # used / allocated, from the exact amounts

    @classmethod
    def of(cls, allocated: int | None, used: int | None, idle: int | None) -> GpuHours:
        allocated, used = allocated or 0, used or 0
        return cls(
            round(allocated / CARD_HOUR, 2),
            round(used / CARD_HOUR, 2),
            round((idle or 0) / CARD_HOUR, 2),
            round(100 * used / allocated, 1) if allocated else 0.0,
        )

    @property
    def wasted(self) -> float:
        """Allocated but not used: the idle and the underused parts together."""
        return round(max(0.0, self.allocated - self.used), 2)

    @property
    def idle(self) -> float:
        """The waste while idle (the idle periods' allocation, which holds a few percent of use,
        capped by the waste so the parts add up to the allocation)."""
        return round(min(self.idle_allocated, self.wasted), 2)

    @property
    def underused(self) -> float:
        """The waste while busy: allocated, not idle, and still not used."""
        return round(max(0.0, self.wasted - self.idle), 2)


@dataclass(frozen=True)
class IdleFlag:
    idle_since: datetime
    gpu_hours_lost: float
    threshold_minutes: int

    def idle_minutes(self, now: datetime) -> int:
        return int((now - self.idle_since).total_seconds() // 60)

    def flagged(self, now: datetime) -> bool:
        return self.idle_minutes(now) >= self.threshold_minutes


@dataclass
class JobCardUsage:
    """A job's cards over its life: busy percent of its share per card and time bucket."""

    cards: list[str]
    bucket_starts: list[datetime]
    bucket_seconds: int
    busy: list[list[float | None]]  # [card][bucket]
    total: GpuHours


@dataclass
class Ranked:
    key: int
    name: str
    team: str
    hours: GpuHours
    threshold_pct: int = DEFAULT_EFFICIENCY_PERCENT  # the team's efficiency threshold

    @property
    def underused(self) -> bool:
        """Used less of its allocation than its team's threshold over the window."""
        return self.hours.allocated > 0 and self.hours.efficiency_pct < self.threshold_pct


@dataclass
class Efficiency:
    since: datetime
    until: datetime
    jobs: list[Ranked]
    teams: list[Ranked]
    trend_starts: list[datetime] = field(default_factory=list)
    trend_seconds: int = 3600
    trend: dict[str, list[float]] = field(default_factory=dict)  # team -> wasted GPU-hours


def cards_now(cluster: Cluster, node_names: Iterable[str]) -> dict[tuple[str, int], CardNow]:
    """(node name, minor) -> busy percent and memory of the last sampled period."""
    step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
    last = cluster.gpu_sampled_until - step
    rows = (
        CardSample.objects.filter(
            node__cluster=cluster,
            node__name__in=list(node_names),
            period_start=last,
            period_seconds=step,
        )
        .values("node__name", "minor")
        .annotate(used=Sum("used"), memory=Sum("memory_mib"))
        .order_by()
    )
    return {
        (r["node__name"], r["minor"]): CardNow(min(100, (r["used"] or 0) // step), r["memory"] or 0)
        for r in rows
    }


@dataclass(frozen=True)
class CardsBusy:
    """The cluster's cards in the last sampled period: how many reported, how busy on average,
    and how many were allocated but idle (`cards_idle_now`)."""

    cards: int
    busy_pct: int
    allocated_idle: int


def cards_busy(cluster: Cluster, idle_cards: frozenset[tuple[str, int]] | None = None) -> CardsBusy:
    """Card utilisation now: the last sampled period of every card of the cluster;
    `idle_cards`: `cards_idle_now(cluster)` when the caller has it already."""
    step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
    rows = CardSample.objects.filter(
        node__cluster=cluster,
        period_start=cluster.gpu_sampled_until - step,
        period_seconds=step,
    )
    cards = rows.values("node_id", "minor").distinct().count()
    used = rows.aggregate(u=Sum("used"))["u"] or 0
    idle = len(cards_idle_now(cluster) if idle_cards is None else idle_cards)
    return CardsBusy(cards, round(used / (step * cards)) if cards else 0, idle)


def cards_idle_now(cluster: Cluster) -> frozenset[tuple[str, int]]:
    """The cards (node name, minor) allocated but idle now: in the last sampled period every
    holder of the card held it idle (under KOORDWEB_GPU_IDLE_PERCENT of its share). The one rule
    of the devices page's count and its "allocated but idle" filter, and of the overview's."""
    step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
    per_card = (
        CardSample.objects.filter(
            node__cluster=cluster,
            period_start=cluster.gpu_sampled_until - step,
            period_seconds=step,
            allocated__gt=0,
        )
        .values("node__name", "minor")
        .annotate(holders=Count("id"), idle=Count("id", filter=Q(idle_allocated__gt=0)))
        .order_by()
    )
    return frozenset(
        (row["node__name"], row["minor"]) for row in per_card if row["idle"] == row["holders"]
    )


def job_idle_flag(job: Job) -> IdleFlag | None:
    """The job's idle flag if its cards are idle now (reads `job.gpu_state`: select it)."""
    if job.state not in JobState.PLACED:
        return None
    try:
        state = job.gpu_state
    except JobGpuState.DoesNotExist:
        return None
    if state.idle_since is None:
        return None
    threshold = job.quota.gpu_idle_alert_minutes if job.quota else DEFAULT_IDLE_MINUTES
    return IdleFlag(state.idle_since, round(state.idle_gpu_hours, 2), threshold)


def idle_flags(jobs: Iterable[Job]) -> dict[int, IdleFlag]:
    """Jobs whose cards are idle now: since when, what it cost so far, their team's threshold."""
    jobs = list(jobs)
    holding = [j.id for j in jobs if j.state in JobState.PLACED]
    states = {s.job_id: s for s in JobGpuState.objects.filter(job_id__in=holding)}
    flags = {}
    for job in jobs:
        if job.id in states:
            job.gpu_state = states[job.id]
            flag = job_idle_flag(job)
            if flag is not None:
                flags[job.id] = flag
    return flags


def flagged_idle_jobs(jobs: QuerySet[Job], *, now: datetime | None = None) -> list[Job]:
    """Running jobs whose cards have been idle longer than their team's threshold."""
    now = now or timezone.now()
    running = jobs.filter(
        state=JobState.RUNNING, gpu_state__idle_since__isnull=False
    ).select_related("quota", "gpu_state")
    flags = idle_flags(running)
    return [job for job in running if job.id in flags and flags[job.id].flagged(now)]


def job_card_usage(job: Job, *, max_buckets: int = 120) -> JobCardUsage:
    """The job's share of each card it held, busy percent per time bucket, over its life."""
    samples = CardSample.objects.filter(job=job)
    bounds = samples.aggregate(first=Min("period_start"), last=Max("period_start"))
    first, last = bounds["first"], bounds["last"]
    if first is None or last is None:
        return JobCardUsage([], [], 60, [], GpuHours(0, 0, 0, 0))
    span = last - first + settings.KOORDWEB_GPU_SAMPLE_SECONDS
    step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
    bucket = max(step, -(-span // max_buckets) // step * step)
    rows = (
        samples.annotate(
            bucket=ExpressionWrapper(
                (F("period_start") - first) / bucket, output_field=BigIntegerField()
            )
        )
        .values("node__name", "minor", "bucket")
        .annotate(a=Sum("allocated"), u=Sum("used"), i=Sum("idle_allocated"))
        .order_by()
    )
    cells: dict[str, dict[int, float]] = defaultdict(dict)
    sums = [0, 0, 0]
    for r in rows:
        card = f"{r['node__name']} #{r['minor']}"
        allocated = r["a"] or 0
        if allocated:
            cells[card][r["bucket"]] = round(100 * (r["u"] or 0) / allocated, 1)
        sums[0] += allocated
        sums[1] += r["u"] or 0
        sums[2] += r["i"] or 0
    count = span // bucket + 1
    cards = sorted(cells)
    return JobCardUsage(
        cards=cards,
        bucket_starts=[from_epoch(first + i * bucket) for i in range(count)],
        bucket_seconds=bucket,
        busy=[[cells[c].get(i) for i in range(count)] for c in cards],
        total=GpuHours.of(*sums),
    )


def efficiency(
    cluster: Cluster,
    *,
    since: datetime,
    until: datetime,
    quotas: QuerySet[ElasticQuota] | None = None,
    limit: int = 50,
    rank: str = "idle",
) -> Efficiency:
    """Jobs and teams ranked by idle GPU-hours (`rank="idle"`, then by unused) or by unused
    (allocated but not used) GPU-hours (`rank="unused"`) in [since, until), each job flagged
    when underused; with the unused GPU-hours per team over time.

    `quotas` limits everything to these teams (a tenant's); None: the whole cluster."""
    order = ("-w", "-i") if rank == "unused" else ("-i", "-w")
    hours = JobUsageHour.objects.filter(
        job__cluster=cluster, hour__gte=epoch(since) - epoch(since) % 3600, hour__lt=epoch(until)
    )
    if quotas is not None:
        hours = hours.filter(quota__in=quotas)
    by_job = list(
        hours.values(
            "job_id",
            "job__namespace",
            "job__name",
            "quota__name",
            "quota__gpu_efficiency_threshold_percent",
        )
        .annotate(
            a=Sum("allocated"),
            u=Sum("used"),
            i=Sum("idle_allocated"),
            w=Sum("allocated") - Sum("used"),
        )
        .order_by(*order, "-a", "job_id")[:limit]
    )
    jobs = [
        Ranked(
            r["job_id"],
            f"{r['job__namespace']}/{r['job__name']}",
            r["quota__name"] or "(no quota)",
            GpuHours.of(r["a"], r["u"], r["i"]),
            _threshold(r["quota__gpu_efficiency_threshold_percent"]),
        )
        for r in by_job
    ]
    teams = [
        Ranked(
            r["quota_id"] or 0,
            r["quota__name"] or "(no quota)",
            r["quota__name"] or "(no quota)",
            GpuHours.of(r["a"], r["u"], r["i"]),
            _threshold(r["quota__gpu_efficiency_threshold_percent"]),
        )
        for r in hours.values("quota_id", "quota__name", "quota__gpu_efficiency_threshold_percent")
        .annotate(
            a=Sum("allocated"),
            u=Sum("used"),
            i=Sum("idle_allocated"),
            w=Sum("allocated") - Sum("used"),
        )
        .order_by(*order, "quota__name")
    ]
    span = until - since
    trend_seconds = 3600 if span <= timedelta(days=2) else 86400
    start = epoch(since) - epoch(since) % trend_seconds
    count = max(1, -(-(epoch(until) - start) // trend_seconds))
    trend: dict[str, list[float]] = {t.name: [0.0] * count for t in teams}
    for r in (
        hours.values("quota__name", "hour").annotate(w=Sum("allocated") - Sum("used")).order_by()
    ):
        index = (r["hour"] - start) // trend_seconds
        if 0 <= index < count:
            series = trend.setdefault(r["quota__name"] or "(no quota)", [0.0] * count)
            series[index] = round(series[index] + max(0, r["w"] or 0) / CARD_HOUR, 2)
    return Efficiency(
        since,
        until,
        jobs,
        teams,
        [from_epoch(start + i * trend_seconds) for i in range(count)],
        trend_seconds,
        trend,
    )


def _threshold(value: int | None) -> int:
    return DEFAULT_EFFICIENCY_PERCENT if value is None else value


def job_gpu_hours(job: Job) -> GpuHours:
    """A job's GPU-hours over its life (from the per-job hour sums)."""
    sums = JobUsageHour.objects.filter(job=job).aggregate(
        a=Sum("allocated"), u=Sum("used"), i=Sum("idle_allocated")
    )
    return GpuHours.of(sums["a"], sums["u"], sums["i"])


def unhealthy_cards(cluster: Cluster, *, limit: int = 20) -> tuple[int, list[tuple[str, int, str]]]:
    """How many accelerator cards are unhealthy, and the first of them (node, minor, model)."""
    cards = cluster_cards(cluster).filter(health=False).order_by("node__name", "minor")
    return cards.count(), list(cards.values_list("node__name", "minor", "model")[:limit])


def team_scope(user: Any) -> QuerySet[ElasticQuota] | None:
    """The teams whose usage `user` may see: None (all) for admins, else their quotas."""
    if user_is_admin(user):
        return None
    return quotas_of_member(user=user)


def card_history(
    cluster: Cluster, *, node: str, minor: int | None, since: datetime, until: datetime
) -> QuerySet[CardSample]:
    """A node's card samples in [since, until), oldest first (card, time index)."""
    rows = CardSample.objects.filter(
        node__cluster=cluster,
        node__name=node,
        period_start__gte=epoch(since),
        period_start__lt=epoch(until),
    )
    if minor is not None:
        rows = rows.filter(minor=minor)
    return rows.select_related("node", "job", "quota").order_by("minor", "period_start", "id")
