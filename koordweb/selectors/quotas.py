"""Reads for the quota pages: each quota's real headroom, what it borrows and lends, what its
waiting jobs ask for, its settings and its change history.

The engine's runtime quota (`Round.metrics["runtime_quota"]`) is what each quota is entitled to
for what it asks now, so for a quota without waiting work it equals what it uses: it says
nothing about room. "May use now" here is the room a new job of the quota would find:

    may use now = min(max, used + free for it), within every ancestor's max as well
    free for it = the cluster's free capacity - the unused min of other quotas that do not lend

Borrowed is what a quota uses above its min; lent is the part of a lending quota's unused min
that borrowers hold now: borrowing takes capacity under nobody's min first, then lenders' unused
min, shared by how much each has unused.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from koordweb.models import Cluster, ElasticQuota, Job, JobState, QuotaChange
from koordweb.selectors.overview import (
    QuotaUse,
    latest_runtime_quota,
    queue_demand,
    quota_usage,
    resource_usage,
)


@dataclass
class QuotaRow:
    use: QuotaUse
    quota: ElasticQuota
    may_use: dict[str, int] = field(default_factory=dict)
    borrowed: dict[str, int] = field(default_factory=dict)
    lent: dict[str, int] = field(default_factory=dict)
    waiting: dict[str, int] = field(default_factory=dict)  # requests of waiting jobs' pods
    waiting_jobs: int = 0


def quota_table(cluster: Cluster, jobs: QuerySet[Job] | None = None) -> list[QuotaRow]:
    """Every quota of the cluster in tree order with its headroom, borrowing and demand."""
    uses = quota_usage(cluster, latest_runtime_quota(cluster))
    quotas = {
        q.name: q
        for q in ElasticQuota.objects.filter(cluster=cluster).select_related("parent", "cluster")
    }
    rows = [QuotaRow(use, quotas[use.name]) for use in uses if use.name in quotas]
    by_name = {row.use.name: row for row in rows}
    waiting_jobs = Job.objects.filter(cluster=cluster, state__in=JobState.WAITING)
    for demand in queue_demand(jobs if jobs is not None else waiting_jobs):
        if demand.quota in by_name:
            by_name[demand.quota].waiting = dict(demand.requests)
            by_name[demand.quota].waiting_jobs = demand.jobs
    usage = resource_usage(cluster)
    capacity = {u.resource: u.capacity - u.allocated for u in usage}
    total = {u.resource: u.capacity for u in usage}
    leaves = [r for r in rows if not r.quota.is_parent] or rows
    unused_min = {r.use.name: _unused_min(r.use) for r in leaves}
    reserved_by = {r.use.name: unused_min[r.use.name] for r in leaves if not r.quota.allow_lent}
    for row in rows:
        subtree = _subtree(row, rows)
        reserved: dict[str, int] = defaultdict(int)
        for name, amounts in reserved_by.items():
            if name not in subtree:
                for resource, amount in amounts.items():
                    reserved[resource] += amount
        row.borrowed = {
            r: n - row.use.min.get(r, 0)
            for r, n in row.use.used.items()
            if n > row.use.min.get(r, 0)
        }
        row.may_use = _may_use(row, by_name, capacity, reserved)
    _lent(leaves, unused_min, total)
    return rows


def _unused_min(use: QuotaUse) -> dict[str, int]:
    return {r: n - use.used.get(r, 0) for r, n in use.min.items() if n > use.used.get(r, 0)}


def _subtree(row: QuotaRow, rows: list[QuotaRow]) -> set[str]:
    names = {row.use.name}
    for other in rows:  # tree order: a parent comes before its children
        if other.use.parent in names:
            names.add(other.use.name)
    return names


def _may_use(
    row: QuotaRow,
    by_name: dict[str, QuotaRow],
    capacity: dict[str, int],
    reserved: dict[str, int],
) -> dict[str, int]:
    resources = set(row.use.max) | set(row.use.min) | set(row.use.used)
    room: dict[str, int] = {}
    for resource in resources:
        free = max(0, capacity.get(resource, 0) - reserved.get(resource, 0))
        most = row.use.used.get(resource, 0) + free
        current: QuotaRow | None = row
        while current is not None:
            ceiling = current.use.max.get(resource)
            if ceiling is not None:
                # An ancestor's room is its max less what it uses beside this quota.
                beside = current.use.used.get(resource, 0) - row.use.used.get(resource, 0)
                most = min(most, ceiling - beside)
            current = by_name.get(current.use.parent) if current.use.parent else None
        room[resource] = max(most, row.use.used.get(resource, 0), 0)
    return room


def _lent(
    leaves: list[QuotaRow], unused_min: dict[str, dict[str, int]], total: dict[str, int]
) -> None:
    lenders = [r for r in leaves if r.quota.allow_lent]
    borrowed: dict[str, int] = defaultdict(int)
    mins: dict[str, int] = defaultdict(int)
    lendable: dict[str, int] = defaultdict(int)
    for row in leaves:
        for resource, amount in row.borrowed.items():
            borrowed[resource] += amount
        for resource, amount in row.use.min.items():
            mins[resource] += amount
    for row in lenders:
        for resource, amount in unused_min[row.use.name].items():
            lendable[resource] += amount
    for row in lenders:
        lent: dict[str, int] = {}
        for resource, amount in unused_min[row.use.name].items():
            # Borrowers take the capacity under nobody's min first.
            unowned = max(0, total.get(resource, 0) - mins[resource])
            drawn = max(0, borrowed[resource] - unowned) if borrowed[resource] else 0
            share = min(1.0, drawn / lendable[resource]) if lendable[resource] else 0.0
            if round(amount * share):
                lent[resource] = round(amount * share)
        row.lent = lent


def quota_history(quota: ElasticQuota, *, limit: int = 50) -> list[QuotaChange]:
    return list(QuotaChange.objects.filter(quota=quota).select_related("user")[:limit])


def cluster_quota_history(cluster: Cluster, *, limit: int = 20) -> list[QuotaChange]:
    changes = QuotaChange.objects.filter(quota__cluster=cluster).select_related("quota")
    return list(changes[:limit])


def quota_by_name(cluster: Cluster, name: str) -> ElasticQuota | None:
    return (
        ElasticQuota.objects.filter(cluster=cluster, name=name)
        .select_related("parent", "cluster")
        .first()
    )


def quota_pending(quota: ElasticQuota) -> dict[str, Any]:
    """How many jobs and pods of the quota wait now (against its pending limits)."""
    jobs = Job.objects.filter(quota=quota, state__in=JobState.WAITING)
    return {"jobs": jobs.count(), "pods": sum(jobs.values_list("total_number", flat=True))}
