"""GPU usage ingest: NodeMetric card reports -> CardSample rows attributed to each card's holders.

Once per sample period (KOORDWEB_GPU_SAMPLE_SECONDS, the beat task `gpu_ingest`) the latest
NodeMetric of every node is read with the pods holding its cards at that moment (their
`scheduling.koordinator.sh/device-allocated` annotations). Each holder gets its share of the card
(gpu-core percent: 100 for a whole card, less for a shared card, a vNPU or an sMLU slice) and the
busy percent it used: its own pod report (`status.podsMetric[].podUsage.devices`) when koordlet
sent one, else the card's busy percent split by share. The free part of a card is a row with no
job. Written with the rows: per job and hour sums (JobUsageHour) and the idle streak (JobGpuState).
A job that moved between rounds is simply held by other cards in later periods.

Only complete periods are charged to a holder: a pod that started during the period (a new job,
or one restarted after a preemption) held its card for part of it, and koordlet's report for
the period mostly predates it, so that period would read as idle. It is left out for that pod
(its share counts as free for the period) and its first charged period is the next one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from koordweb.device_allocated import card_share_percent, parse_device_allocation
from koordweb.models import (
    CardSample,
    Cluster,
    JobGpuState,
    JobState,
    JobUsageHour,
    NodeMetric,
    Pod,
    latest_node_metric_ids,
)
from koordweb.models.gpu_usage import epoch, from_epoch
from koordweb.selectors.card_tallies import cluster_cards
from scheduler.vocabulary import ANNOTATION_DEVICE_ALLOCATED, GPU_CORE, GPU_MEMORY

MIB = 1024**2


@dataclass(frozen=True)
class Holder:
    """One pod's share of one card."""

    pod: str  # namespace/name, as NodeMetric's podsMetric names it
    job_id: int
    quota_id: int | None
    share: int  # gpu-core percent of the card
    since: int | None = None  # epoch seconds the pod started (or was bound), if known


@dataclass(frozen=True, slots=True)
class SampleRow:
    """One CardSample row before it is written (plain values: written by COPY or executemany)."""

    period_start: int
    period_seconds: int
    node_id: int
    minor: int
    job_id: int | None
    quota_id: int | None
    allocated: int
    used: int
    idle_allocated: int
    memory_mib: int


COLUMNS = (
    "period_start",
    "period_seconds",
    "node_id",
    "minor",
    "job_id",
    "quota_id",
    "allocated",
    "used",
    "idle_allocated",
    "memory_mib",
)


@dataclass(frozen=True)
class CardReport:
    """What koordlet said about one card in one period."""

    node_id: int
    minor: int
    busy: int  # percent of the card's cores
    memory_bytes: int
    pod_usage: Mapping[str, Mapping[str, int]]  # pod -> resources on this card


def card_holders(cluster: Cluster, node_ids: Iterable[int]) -> dict[tuple[int, int], list[Holder]]:
    """(node id, minor) -> the pods holding a share of that gpu card now (terminating ones too)."""
    holders: dict[tuple[int, int], list[Holder]] = defaultdict(list)
    pods = Pod.objects.filter(
        cluster=cluster,
        node_id__in=list(node_ids),
        job__state__in=JobState.HOLDING,
        phase__in=("Pending", "Running"),
    ).values_list(
        "node_id",
        "namespace",
        "name",
        "job_id",
        "job__quota_id",
        "annotations",
        "started_at",
        "bound_at",
    )
    for node_id, namespace, name, job_id, quota_id, pod_annotations, started, bound in pods:
        raw = (pod_annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED)
        since = started or bound
        for device_type, minor, resources in parse_device_allocation(raw):
            share = card_share_percent(resources)
            if device_type == "gpu" and share > 0:
                holders[(node_id, minor)].append(
                    Holder(
                        f"{namespace}/{name}",
                        job_id,
                        quota_id,
                        min(share, 100),
                        epoch(since) if since else None,
                    )
                )
    return holders


def held_whole_period(holder: Holder, *, start: int, now: int) -> bool:
    """Whether `holder` held its card for the whole period from `start`: not when its pod
    started inside it (a start after `now`, a clock we cannot trust, is taken as complete)."""
    return holder.since is None or not start < holder.since <= now


def card_rows(
    report: CardReport, holders: list[Holder], *, start: int, step: int, idle_percent: int
) -> list[SampleRow]:
    """The rows of one card for one period: one per holder, one for the free part if any."""
    rows: list[SampleRow] = []
    held = min(100, sum(h.share for h in holders))
    own = {h.pod: report.pod_usage.get(h.pod) for h in holders}
    reported = any(usage is not None for usage in own.values())
    attributed = 0
    for holder in holders:
        usage = own[holder.pod]
        if reported:
            busy = min(holder.share, max(0, int((usage or {}).get(GPU_CORE, 0))))
            memory = int((usage or {}).get(GPU_MEMORY, 0))
        else:
            busy = min(holder.share, report.busy * holder.share // max(held, 1))
            memory = report.memory_bytes * holder.share // max(held, 1)
        attributed += busy
        idle = 100 * busy < idle_percent * holder.share
        rows.append(
            SampleRow(
                start,
                step,
                report.node_id,
                report.minor,
                holder.job_id,
                holder.quota_id,
                holder.share * step,
                busy * step,
                holder.share * step if idle else 0,
                memory // MIB,
            )
        )
    if held < 100:
        rest = max(0, report.busy - attributed)
        memory = report.memory_bytes - sum(r.memory_mib for r in rows) * MIB
        rows.append(
            SampleRow(
                start,
                step,
                report.node_id,
                report.minor,
                None,
                None,
                0,
                min(rest, 100 - held) * step,
                0,
                max(0, memory) // MIB,
            )
        )
    return rows


def metric_reports(metric: NodeMetric, minors: Iterable[int]) -> list[CardReport]:
    """The cards of one NodeMetric, restricted to the node's known gpu minors."""
    by_pod: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    for pod, cards in (metric.pod_gpu_usage or {}).items():
        for minor, resources in cards.items():
            by_pod[str(minor)][pod] = resources
    reports = []
    for minor in minors:
        usage = (metric.gpu_usage or {}).get(str(minor))
        if usage is None:
            continue
        reports.append(
            CardReport(
                node_id=metric.node_id,
                minor=minor,
                busy=max(0, min(100, int(usage.get(GPU_CORE, 0)))),
                memory_bytes=max(0, int(usage.get(GPU_MEMORY, 0))),
                pod_usage=by_pod.get(str(minor), {}),
            )
        )
    return reports


def gpu_samples_ingest(
    *, cluster: Cluster, now: datetime, period_start: int | None = None
) -> dict[str, int]:
    """Sample every card of `cluster` for one period (by default the last complete one).

    A period is sampled once: a second call for it (or an earlier one) writes nothing. Each node
    contributes its latest NodeMetric reported by `now`, if it is fresh (reported after the start
    of the period before the last: koordlet reports what the last interval looked like)."""
    step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
    start = period_start if period_start is not None else epoch(now) // step * step - step
    if start < cluster.gpu_sampled_until:
        return {"samples": 0}
    end = start + step
    fresh_after = from_epoch(end - 3 * step)
    latest_ids = latest_node_metric_ids(
        NodeMetric.objects.filter(
            node__cluster=cluster, reported_at__gt=fresh_after, reported_at__lte=now
        )
    )
    metrics = list(NodeMetric.objects.filter(id__in=latest_ids))
    minors: dict[int, list[int]] = defaultdict(list)
    for node_id, minor in cluster_cards(cluster).values_list("node_id", "minor"):
        minors[node_id].append(minor)
    holders = card_holders(cluster, [m.node_id for m in metrics])
    idle_percent = settings.KOORDWEB_GPU_IDLE_PERCENT
    rows: list[SampleRow] = []
    moment = epoch(now)
    for metric in metrics:
        for report in metric_reports(metric, minors.get(metric.node_id, [])):
            card = holders.get((report.node_id, report.minor), [])
            rows.extend(
                card_rows(
                    report,
                    [h for h in card if held_whole_period(h, start=start, now=moment)],
                    start=start,
                    step=step,
                    idle_percent=idle_percent,
                )
            )
    with transaction.atomic():
        # Two workers sampling the same period: the second finds it taken and writes nothing.
        locked = Cluster.objects.select_for_update().only("gpu_sampled_until").get(id=cluster.id)
        if start < locked.gpu_sampled_until:
            return {"samples": 0}
        samples_record(periods=[(start, rows)], step=step)
        Cluster.objects.filter(id=cluster.id).update(gpu_sampled_until=end)
    cluster.gpu_sampled_until = end
    return {"samples": len(rows), "nodes": len(metrics)}


def samples_record(*, periods: list[tuple[int, list[SampleRow]]], step: int) -> None:
    """Write the rows of consecutive periods, the per-job hour sums and the idle streaks."""
    hours: dict[tuple[int, int], list[int]] = {}
    quota_of: dict[int, int | None] = {}
    streaks: list[tuple[int, dict[int, bool], dict[int, int]]] = []
    for start, rows in periods:
        busy: dict[int, bool] = {}
        held: dict[int, int] = defaultdict(int)
        for row in rows:
            if row.job_id is None:
                continue
            sums = hours.setdefault((row.job_id, start - start % 3600), [0, 0, 0])
            sums[0] += row.allocated
            sums[1] += row.used
            sums[2] += row.idle_allocated
            quota_of[row.job_id] = row.quota_id
            busy[row.job_id] = busy.get(row.job_id, False) or row.idle_allocated == 0
            held[row.job_id] += row.allocated
        streaks.append((start + step, busy, held))
    samples_insert([row for _, rows in periods for row in rows])
    _hours_add(hours, quota_of)
    _streaks_follow(streaks)


def samples_insert(rows: list[SampleRow]) -> None:
    """Bulk insert: COPY on PostgreSQL, executemany elsewhere (no model instance per row)."""
    if not rows:
        return
    table = CardSample._meta.db_table
    names = ", ".join(COLUMNS)
    values = [tuple(getattr(row, c) for c in COLUMNS) for row in rows]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            raw = cursor.cursor  # psycopg 3: COPY FROM STDIN, row by row
            with raw.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for value in values:
                    copy.write_row(value)
            return
        marks = ", ".join(["%s"] * len(COLUMNS))
        cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", values)


def _hours_add(hours: dict[tuple[int, int], list[int]], quota_of: dict[int, int | None]) -> None:
    """Add to the per-job hour sums: increments in SQL for existing rows, inserts for new ones
    (one statement per row through executemany: bulk_update's CASE expressions cost seconds)."""
    if not hours:
        return
    wanted = Q()
    for hour in {hour for _, hour in hours}:
        wanted |= Q(hour=hour, job_id__in=[job for job, h in hours if h == hour])
    existing = set(JobUsageHour.objects.filter(wanted).values_list("job_id", "hour"))
    table = JobUsageHour._meta.db_table
    increments = [
        (allocated, used, idle, job_id, hour)
        for (job_id, hour), (allocated, used, idle) in hours.items()
        if (job_id, hour) in existing
    ]
    if increments:
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {table} SET allocated = allocated + %s, used = used + %s, "
                "idle_allocated = idle_allocated + %s WHERE job_id = %s AND hour = %s",
                increments,
            )
    JobUsageHour.objects.bulk_create(
        [
            JobUsageHour(
                job_id=job_id,
                quota_id=quota_of.get(job_id),
                hour=hour,
                allocated=allocated,
                used=used,
                idle_allocated=idle,
            )
            for (job_id, hour), (allocated, used, idle) in hours.items()
            if (job_id, hour) not in existing
        ],
        batch_size=2000,
    )


def _streaks_follow(streaks: list[tuple[int, dict[int, bool], dict[int, int]]]) -> None:
    """Each job's idle streak: reset by a busy period, extended (and costed) by an idle one."""
    job_ids = {job for _, busy, _ in streaks for job in busy}
    if not job_ids:
        return
    states = {s.job_id: s for s in JobGpuState.objects.filter(job_id__in=job_ids)}
    fresh: dict[int, JobGpuState] = {}
    for end, busy, held in streaks:
        moment = from_epoch(end)
        for job_id, was_busy in busy.items():
            state = states.get(job_id) or fresh.get(job_id)
            if state is None:
                state = fresh[job_id] = JobGpuState(job_id=job_id)
            if was_busy:
                state.idle_since, state.idle_allocated, state.last_busy_at = None, 0, moment
            else:
                if state.idle_since is None:
                    state.idle_since = from_epoch(end - settings.KOORDWEB_GPU_SAMPLE_SECONDS)
                state.idle_allocated += held[job_id]
            state.last_sample_at = moment
    JobGpuState.objects.bulk_create(list(fresh.values()), batch_size=2000)
    if states:
        adapt = connection.ops.adapt_datetimefield_value
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {JobGpuState._meta.db_table} SET idle_since = %s, idle_allocated = %s, "
                "last_busy_at = %s, last_sample_at = %s WHERE job_id = %s",
                [
                    (
                        adapt(s.idle_since),
                        s.idle_allocated,
                        adapt(s.last_busy_at),
                        adapt(s.last_sample_at),
                        s.job_id,
                    )
                    for s in states.values()
                ],
            )
