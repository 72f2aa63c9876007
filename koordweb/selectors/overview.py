"""Reads for the overview and quota pages: capacity vs allocation, job counts, alerts, quota use.

Everything here aggregates in one or two queries per table so the page stays fast at 5,000
nodes; per-resource sums are done in Python over `values_list` rows (JSON fields differ
between SQLite and PostgreSQL, so no database-side JSON arithmetic).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, QuerySet

from koordweb.models import Cluster, ElasticQuota, Job, Node, Pod, Preemption, Round
from koordweb.presenters.quantities import WHOLE_DEVICES, number
from koordweb.selectors.topology import OCCUPYING_PHASES, node_allocations


@dataclass(frozen=True)
class ResourceUse:
    resource: str
    capacity: int
    allocated: int


@dataclass(frozen=True)
class Alert:
    kind: str  # topology, round or preemption
    message: str
    target: int | None = None  # the round or preemption to open


@dataclass
class QuotaUse:
    name: str
    parent: str
    depth: int
    min: dict[str, int]
    max: dict[str, int]
    used: dict[str, int] = field(default_factory=dict)
    runtime: dict[str, int] | None = None


def resource_usage(cluster: Cluster) -> list[ResourceUse]:
    """Allocatable vs requested per resource over the whole cluster, largest first by name."""
    capacity: dict[str, int] = defaultdict(int)
    for allocatable in Node.objects.filter(cluster=cluster).values_list("allocatable", flat=True):
        for name, amount in (allocatable or {}).items():
            capacity[name] += int(amount)
    allocated: dict[str, int] = defaultdict(int)
    for per_node in node_allocations(cluster).values():
        for name, amount in per_node.items():
            allocated[name] += amount
    return [ResourceUse(name, capacity[name], allocated.get(name, 0)) for name in sorted(capacity)]


# What the capacity chart shows: what a pod asks for, in the units people plan with. Device
# shares (gpu-core, gpu-memory-ratio) are in the accelerator chart, counted per card.
CAPACITY_RESOURCES = ("cpu", "memory", "pods")


def capacity_usage(cluster: Cluster) -> list[ResourceUse]:
    """CPU, memory, pods and whole-card resources: allocatable vs what bound pods hold (pods
    counted as pods)."""
    usage = {u.resource: u for u in resource_usage(cluster)}
    occupying = Pod.objects.filter(
        cluster=cluster, node__isnull=False, phase__in=OCCUPYING_PHASES
    ).count()
    if "pods" in usage:
        usage["pods"] = ResourceUse("pods", usage["pods"].capacity, occupying)
    wanted = [r for r in CAPACITY_RESOURCES if r in usage]
    wanted += sorted(r for r in usage if r in WHOLE_DEVICES)
    return [usage[r] for r in wanted]


@dataclass(frozen=True)
class TeamDemand:
    quota: str
    jobs: int
    pods: int
    requests: dict[str, int]


def queue_demand(jobs: QuerySet[Job]) -> list[TeamDemand]:
    """What the waiting jobs ask for, per quota (team): jobs, pods, and their requests summed."""
    per_quota: dict[str, dict[str, int]] = defaultdict(dict)
    pods: dict[str, int] = defaultdict(int)
    job_ids: dict[str, set[int]] = defaultdict(set)
    rows = Pod.objects.filter(job__in=jobs, node__isnull=True).values_list(
        "job_id", "job__quota__name", "requests"
    )
    for job_id, quota, requests in rows:
        team = quota or "(no quota)"
        job_ids[team].add(job_id)
        pods[team] += 1
        _sum_into(per_quota[team], requests or {})
    return sorted(
        (TeamDemand(team, len(job_ids[team]), pods[team], per_quota[team]) for team in pods),
        key=lambda d: (-d.pods, d.quota),
    )


@dataclass(frozen=True)
class RoundsHealth:
    rounds: int
    failed: int
    median_ms: int | None
    slowest_ms: int | None
    last: Round | None
    trend: list[tuple[str, int, int]]  # (round label, jobs considered, jobs placed), oldest first


def rounds_health(cluster: Cluster, last: int = 100) -> RoundsHealth:
    """The last rounds: how many failed, how long they took, and the queue they saw."""
    rounds = list(Round.objects.filter(cluster=cluster).order_by("-started_at", "-id")[:last])
    durations = sorted(r.duration_ms for r in rounds if r.duration_ms is not None)
    return RoundsHealth(
        rounds=len(rounds),
        failed=sum(1 for r in rounds if r.state == Round.State.FAILED),
        median_ms=durations[len(durations) // 2] if durations else None,
        slowest_ms=durations[-1] if durations else None,
        last=rounds[0] if rounds else None,
        trend=[(f"#{r.number_shown}", r.jobs_considered, r.jobs_placed) for r in reversed(rounds)],
    )


def job_state_counts(jobs: QuerySet[Job]) -> dict[str, int]:
    rows = jobs.order_by().values("state").annotate(n=Count("id"))
    return {row["state"]: row["n"] for row in rows}


def recent_rounds(cluster: Cluster, limit: int = 10) -> list[Round]:
    return list(Round.objects.filter(cluster=cluster).order_by("-started_at", "-id")[:limit])


def cluster_alerts(
    cluster: Cluster, *, outside: list[str], since: datetime | None = None
) -> list[Alert]:
    """Things an admin should look at: nodes outside the topology, failed rounds, blocked
    preemptions (the last ones only, so a long history does not flood the page)."""
    alerts: list[Alert] = []
    if outside:
        shown = ", ".join(outside[:10]) + (
            f" and {len(outside) - 10} more" if len(outside) > 10 else ""
        )
        nodes = "1 node" if len(outside) == 1 else f"{number(len(outside))} nodes"
        alerts.append(Alert("topology", f"{nodes} outside the topology: {shown}"))
    rounds = Round.objects.filter(cluster=cluster, state=Round.State.FAILED)
    if since:
        rounds = rounds.filter(started_at__gte=since)
    for failed in rounds.order_by("-started_at")[:5]:
        alerts.append(
            Alert(
                "round",
                f"round {failed.number_shown} failed at {failed.started_at:%Y-%m-%d %H:%M}: "
                f"{(failed.error or 'no error recorded').splitlines()[0][:200]}",
                failed.pk,
            )
        )
    blocked = Preemption.objects.filter(cluster=cluster, state=Preemption.State.BLOCKED)
    if since:
        blocked = blocked.filter(created_at__gte=since)
    for item in blocked.select_related("preemptor").order_by("-created_at")[:5]:
        alerts.append(
            Alert(
                "preemption",
                f"preemption for {item.preemptor} blocked by a disruption budget",
                item.pk,
            )
        )
    return alerts


def _sum_into(into: dict[str, int], amounts: Mapping[str, int], times: int = 1) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + int(amount) * times


def quota_usage(
    cluster: Cluster, runtime: Mapping[str, Mapping[str, int]] | None = None
) -> list[QuotaUse]:
    """The quota tree in depth-first order with `used` = requests of the pods occupying nodes,
    summed into every ancestor. `runtime` (quota name -> resources) comes from the engine."""
    quotas = list(ElasticQuota.objects.filter(cluster=cluster).select_related("parent"))
    by_id = {q.pk: q for q in quotas}
    used: dict[int, dict[str, int]] = defaultdict(dict)
    pods = Pod.objects.filter(
        cluster=cluster, node__isnull=False, phase__in=OCCUPYING_PHASES, job__quota__isnull=False
    ).values_list("job__quota_id", "requests")
    for quota_id, requests in pods:
        current = by_id.get(quota_id)
        while current is not None:
            _sum_into(used[current.pk], requests or {})
            current = by_id.get(current.parent_id) if current.parent_id else None
    children: dict[int | None, list[ElasticQuota]] = defaultdict(list)
    for quota in quotas:
        children[quota.parent_id].append(quota)
    ordered: list[QuotaUse] = []

    def walk(parent_id: int | None, depth: int) -> None:
        for quota in sorted(children.get(parent_id, []), key=lambda q: q.name):
            ordered.append(
                QuotaUse(
                    quota.name,
                    quota.parent.name if quota.parent else "",
                    depth,
                    dict(quota.min or {}),
                    dict(quota.max or {}),
                    used.get(quota.pk, {}),
                    dict(runtime[quota.name]) if runtime and quota.name in runtime else None,
                )
            )
            walk(quota.pk, depth + 1)

    walk(None, 0)
    return ordered


def latest_runtime_quota(cluster: Cluster) -> dict[str, dict[str, int]]:
    """Runtime quota per quota name as the last successful round recorded it, if it did."""
    last = (
        Round.objects.filter(cluster=cluster, state=Round.State.SUCCEEDED)
        .order_by("-started_at")
        .values_list("metrics", flat=True)
        .first()
    )
    runtime = (last or {}).get("runtime_quota") if isinstance(last, dict) else None
    return runtime if isinstance(runtime, dict) else {}
