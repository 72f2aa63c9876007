"""Back-off for unschedulable jobs, as kube-scheduler's unschedulable queue: a job the engine could
not place, and whose inputs have not changed since, is not handed to the engine again until its
back-off expires. It keeps its last verdict (no new decision is written for it).

kube-scheduler (pkg/scheduler/backend/queue/scheduling_queue.go) parks an unschedulable pod until
a cluster event that may make it schedulable moves it back (a pod deleted from a node, a node
added or changed, ...), backs it off 1 s doubling per attempt, and flushes it back after at most
5 minutes whatever happened. Here, per cluster and in the worker that runs its rounds:

- A job is backed off after a round that found it Unschedulable (not preempting, not waiting) with
  no pod of it bound or nominated: `attempts` + 1, held until `min(1 s * 2^(attempts-1), 300 s)`
  after that round.
- It is handed to the engine again at once when something that could help it changed since the
  round that tried it (`Changes`): for a job every node refused by a node-static Filter (node
  selector or affinity, taints, cordon), a node added, removed or changed in labels, taints or
  cordon; for any other, also a pod that left a node or a nomination (or a placement that did not
  bind), a node changed in any way the profile reads, a quota, budget or topology changed, a
  quota's capped demand shrinking, or a pod of lower priority newly bound (a victim it may take).
  Its own job or pods changing releases it too. The comparison is of states, not of events, so a
  worker that missed rounds compares with what it saw last; a worker without state holds nothing.
- Leaving a job out must not change any other job's outcome: a pending pod counts in its quota's
  demand (Koordinator's request), from which every quota's runtime quota is computed. A job is
  left out only while its quota's demand, and every ancestor's, stays at or above the quota's max
  in each resource it requests without it (the demand the engine sees, capped at max, is then the
  same); the jobs a quota keeps in are the first in queue order. Most of a tenant's backlog beyond
  what its quota admits is left out; a quota without a max for a requested resource keeps all.

The round (`engine/pipeline.py`) calls `backoff_hold` on the snapshot it built (cold or warm: the
same rows give the same choice) and `backoff_record` after its commit; a failed round forgets the
cluster's state (`backoff_forget`). The jobs a round left out are published in the shared cache
(`backoff_held`: their engine ids, their job rows and the quotas and resources their demand
touches), so a what-if in another process leaves out the same ones without reading them.

What a round pays for the jobs it holds is kept small: each quota's demand is summed once per
snapshot (`quota_demand.demand_sums`, by pods of one quota sharing one requests document), and a
held job's own demand is kept with its back-off instead of being summed from its pods every
round.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain, compress, repeat
from operator import attrgetter, is_not, not_
from typing import Any

from django.core.cache import caches

from koordweb.engine.quota_demand import (
    Demand,
    capped_demand,
    demand_shrunk,
    demand_sums,
    pods_demand,
    quota_neutral,
)
from scheduler.api import UNBOUNDED, Cause, Profile, QuotaTree, RoundResult
from scheduler.model import ClusterSnapshot, JobInfo, NodeInfo, PodInfo
from scheduler.vocabulary import FINISHED_POD_PHASES

INITIAL_SECONDS = 1.0  # kube-scheduler's podInitialBackoffDuration
MAX_SECONDS = 300.0  # podMaxInUnschedulablePodsDuration: a job is tried again at least this often
# Filters whose verdict on a node reads only the node's spec and the pod's: nothing but a node
# change can turn their "no" into a "yes" (kube's queueing hints for these plugins).
NODE_STATIC_FILTERS = frozenset({"NodeUnschedulable", "NodeAffinity", "TaintToleration"})
HELD_CACHE_SECONDS = 600


@dataclass(frozen=True)
class BackedOff:
    """One engine job's back-off: its attempts, until when (snapshot clock), whether only node
    specs held it back, its job and pods as tried (a change to them releases it) and their
    requests summed per the pods' own quota (what leaving it out takes from each quota)."""

    attempts: int
    until: float
    node_static: bool
    job: JobInfo
    pods: tuple[PodInfo, ...]
    demand: Demand = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    """What the last round saw, to compare the next one with: each node's spec, each bound or
    nominated pod's node and requests (the round's placements and nominations included), each
    quota's capped demand, the small tables."""

    node_specs: dict[str, tuple[Any, ...]]
    nodes: dict[str, tuple[Any, ...]]
    occupied: dict[str, tuple[str, Mapping[str, int]]]
    demand: dict[str, dict[str, int]]
    tables: tuple[Any, ...]


@dataclass
class ClusterBackoff:
    jobs: dict[str, BackedOff] = field(default_factory=dict)
    seen: Seen | None = None


@dataclass(frozen=True)
class HeldHint:
    """What the cluster's last round left out, as published for what-ifs: engine job ids, the
    job rows behind them (empty when the round did not know them) and, per quota their pods
    belong to, the resources they request."""

    jobs: frozenset[str] = frozenset()
    rows: tuple[int, ...] = ()
    touches: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class HoldReport:
    """What `backoff_hold` left out: engine job ids and their pod count; released: back to the
    engine this round (expired or something changed)."""

    held: tuple[str, ...] = ()
    held_pods: int = 0
    released: int = 0

    def metrics(self) -> dict[str, int]:
        return {
            "backoff_held_jobs": len(self.held),
            "backoff_held_pods": self.held_pods,
            "backoff_released": self.released,
        }


_states: dict[int, ClusterBackoff] = {}
_lock = threading.Lock()

# A round's snapshot holds every pending pod a tenant parked: the passes over all of its pods are
# made with the C-level iterators (map, compress, zip) and a Python step only per pod that matters.
_key = attrgetter("key")
_node = attrgetter("node")
_job_id = attrgetter("job_id")
_nominated = attrgetter("nominated_node")


def pods_by_key(snapshot: ClusterSnapshot) -> dict[str, PodInfo]:
    return dict(zip(map(_key, snapshot.pods), snapshot.pods, strict=True))


def _bound(pods: tuple[PodInfo, ...]) -> Iterator[PodInfo]:
    """The pods with a node."""
    return compress(pods, map(is_not, map(_node, pods), repeat(None)))


def _holding(pods: tuple[PodInfo, ...]) -> Iterator[PodInfo]:
    """The pods with a node, then those with a nominated one (a pod may come twice)."""
    nominated = compress(pods, map(is_not, map(_nominated, pods), repeat(None)))
    return chain(_bound(pods), nominated)


def _without_jobs(pods: tuple[PodInfo, ...], job_ids: set[str]) -> tuple[PodInfo, ...]:
    return tuple(compress(pods, map(not_, map(job_ids.__contains__, map(_job_id, pods)))))


def _own_pods(job: JobInfo, pods: Mapping[str, PodInfo]) -> tuple[PodInfo, ...]:
    """The job's pods found in `pods`, in its order."""
    return tuple(filter(None, map(pods.get, job.pod_keys)))


def backoff_seconds(attempts: int) -> float:
    """1 s doubling per attempt, at most 5 minutes."""
    return min(INITIAL_SECONDS * 2 ** max(0, min(attempts - 1, 30)), MAX_SECONDS)


def backoff_forget(cluster_id: int | None = None) -> None:
    """Drop a cluster's back-off state (None: every cluster's): its next round tries every job."""
    with _lock:
        if cluster_id is None:
            _states.clear()
        else:
            _states.pop(cluster_id, None)
            _publish(cluster_id, HeldHint())


def backoff_state(cluster_id: int) -> ClusterBackoff | None:
    """The state kept for a cluster (tests and diagnostics)."""
    return _states.get(cluster_id)


def backoff_hold(
    cluster_id: int, snapshot: ClusterSnapshot, profile: Profile
) -> tuple[ClusterSnapshot, HoldReport]:
    """The snapshot the engine gets: `snapshot` without the jobs still backed off (and their
    pods). Jobs whose back-off expired or whose inputs changed are released for this round."""
    with _lock:
        state = _states.get(cluster_id)
        if state is None or not state.jobs or state.seen is None:
            _publish(cluster_id, HeldHint())
            return snapshot, HoldReport()
        pods = pods_by_key(snapshot)
        jobs = {j.id: j for j in snapshot.jobs}
        changes = Changes.between(state.seen, snapshot, pods, profile)
        candidates: list[JobInfo] = []
        released = 0
        for job_id, entry in list(state.jobs.items()):
            job = jobs.get(job_id)
            if job is None:
                del state.jobs[job_id]  # placed elsewhere, cancelled, gone
                continue
            own = _own_pods(job, pods)
            if (
                snapshot.now >= entry.until
                or (job is not entry.job and job != entry.job)
                or own != entry.pods
                or changes.may_help(entry)
            ):
                released += 1
                continue
            candidates.append(job)
        entries = state.jobs
        held = quota_neutral(snapshot, candidates, pods, lambda job: entries[job.id].demand)
        report = HoldReport(
            held=tuple(sorted(j.id for j in held)),
            held_pods=sum(len(j.pod_keys) for j in held),
            released=released,
        )
        _publish(cluster_id, _hint(cluster_id, snapshot, report.held, entries))
        if not held:
            return snapshot, report
        out = {j.id for j in held}
        return (
            replace(
                snapshot,
                pods=_without_jobs(snapshot.pods, out),
                jobs=tuple(j for j in snapshot.jobs if j.id not in out),
            ),
            report,
        )


def _hint(
    cluster_id: int, snapshot: ClusterSnapshot, held: tuple[str, ...], entries: dict[str, BackedOff]
) -> HeldHint:
    """The held jobs as a what-if reads them: their job rows come from the warm snapshot's index
    of this very snapshot (a cold round publishes none, and what-ifs read every row)."""
    if not held:
        return HeldHint()
    from koordweb.engine.warm import warm_index  # the warm state is the round's, read late

    index = warm_index(cluster_id, snapshot)
    rows: tuple[int, ...] = ()
    if index is not None:
        rows = tuple(sorted(r.id for j in held for r in index.jobs_by_engine_id.get(j, ())))
    touches: dict[str, set[str]] = {}
    for job_id in held:
        for quota, amounts in entries[job_id].demand.items():
            touches.setdefault(quota, set()).update(r for r, v in amounts.items() if v)
    return HeldHint(
        jobs=frozenset(held),
        rows=rows,
        touches={quota: tuple(sorted(rs)) for quota, rs in touches.items()},
    )


def backoff_record(
    cluster_id: int,
    snapshot: ClusterSnapshot,
    result: RoundResult,
    held: HoldReport,
    profile: Profile,
) -> None:
    """After a round's commit: the jobs it found unschedulable are backed off (one attempt
    more), the others forgotten; `snapshot` is the whole one (held jobs included)."""
    with _lock:
        state = _states.setdefault(cluster_id, ClusterBackoff())
        kept = {job_id: state.jobs[job_id] for job_id in held.held if job_id in state.jobs}
        preempting = {p.preemptor for p in result.preemptions}
        jobs = {j.id: j for j in snapshot.jobs}
        pods = pods_by_key(snapshot)
        for job_id, verdict in result.unschedulable.items():
            job = jobs.get(job_id)
            if job is None or verdict.code == "Wait" or job_id in preempting:
                continue
            own = _own_pods(job, pods)
            if not own or any(not p.is_pending or p.nominated_node for p in own):
                continue
            before = state.jobs.get(job_id)
            attempts = (before.attempts if before else 0) + 1
            kept[job_id] = BackedOff(
                attempts=attempts,
                until=snapshot.now + backoff_seconds(attempts),
                node_static=node_static(verdict.cause, len(snapshot.nodes)),
                job=job,
                pods=own,
                demand=pods_demand(own),
            )
        state.jobs = kept
        state.seen = seen_of(snapshot, result, profile, pods) if kept else None


def backoff_held(cluster_id: int) -> HeldHint:
    """What the cluster's last round left out (read by the what-if, which may run in another
    process: the shared cache); nothing when the cache has no word of it."""
    value = caches["default"].get(f"backoff:held:{cluster_id}")
    if not isinstance(value, dict):
        return HeldHint()
    try:
        return HeldHint(
            jobs=frozenset(str(j) for j in value.get("jobs", ())),
            rows=tuple(int(r) for r in value.get("rows", ())),
            touches={
                str(q): tuple(str(r) for r in rs) for q, rs in value.get("touches", {}).items()
            },
        )
    except (AttributeError, TypeError, ValueError):
        return HeldHint()  # another format: read as nothing held


def snapshot_without(snapshot: ClusterSnapshot, job_ids: frozenset[str]) -> ClusterSnapshot:
    """`snapshot` without those jobs and their pods (only jobs with no pod bound or nominated)."""
    if not job_ids:
        return snapshot
    pods = pods_by_key(snapshot)
    waiting = [
        j
        for j in snapshot.jobs
        if j.id in job_ids
        and all(k in pods and pods[k].is_pending and not pods[k].nominated_node for k in j.pod_keys)
    ]
    out = {j.id for j in quota_neutral(snapshot, waiting, pods)}
    if not out:
        return snapshot
    return replace(
        snapshot,
        pods=_without_jobs(snapshot.pods, out),
        jobs=tuple(j for j in snapshot.jobs if j.id not in out),
    )


def left_out_is_neutral(snapshot: ClusterSnapshot, touches: Mapping[str, Iterable[str]]) -> bool:
    """Whether jobs whose pods request `touches` (quota -> resources), missing from `snapshot`,
    may stay out of it: every quota they count in, and each ancestor, has a demand at or above
    its max in each of those resources without them, so its capped demand is the same."""
    if not snapshot.quotas or not touches:
        return True
    tree = QuotaTree.build(snapshot.quotas)
    sums = demand_sums(snapshot)
    for quota, resources in touches.items():
        if quota not in tree.quotas:
            continue
        for name in tree.ancestors(quota):
            ceiling = tree.quotas[name].max
            for r in resources:
                if sums[name].get(r, 0) < max(1, int(ceiling.get(r, UNBOUNDED))):
                    return False
    return True


def _publish(cluster_id: int, hint: HeldHint) -> None:
    # The cache is a hint for what-ifs: a round never fails for it.
    value = {
        "jobs": sorted(hint.jobs),
        "rows": list(hint.rows),
        "touches": {q: list(rs) for q, rs in hint.touches.items()},
    }
    with contextlib.suppress(Exception):
        caches["default"].set(f"backoff:held:{cluster_id}", value, HELD_CACHE_SECONDS)


def node_static(cause: Cause | None, nodes: int) -> bool:
    """Every node refused the job by a node-static Filter (node affinity, taints, cordon)."""
    if cause is None or not cause.node_reasons:
        return False
    reasons = cause.node_reasons
    return all(r.plugin in NODE_STATIC_FILTERS for r in reasons) and (
        sum(r.nodes for r in reasons) >= nodes
    )


def _node_spec(node: NodeInfo) -> tuple[Any, ...]:
    return (node.labels, node.taints, node.unschedulable)


def _node_all(node: NodeInfo, load_aware: bool) -> tuple[Any, ...]:
    parts: tuple[Any, ...] = (
        node.allocatable,
        node.labels,
        node.annotations,
        node.taints,
        node.unschedulable,
        node.devices,
    )
    if load_aware:
        parts += (node.usage, node.usage_reported_at, node.pod_usages, node.aggregated_usage)
    return parts


def _load_aware(profile: Profile) -> bool:
    return any(spec.name == "LoadAware" for spec in profile.plugins)


def _tables(snapshot: ClusterSnapshot) -> tuple[Any, ...]:
    return (snapshot.quotas, snapshot.pdbs, snapshot.topology)


def seen_of(
    snapshot: ClusterSnapshot,
    result: RoundResult,
    profile: Profile,
    pods: Mapping[str, PodInfo] | None = None,
) -> Seen:
    load_aware = _load_aware(profile)
    occupied: dict[str, tuple[str, Mapping[str, int]]] = {}
    for pod in _holding(snapshot.pods):
        where = pod.node or pod.nominated_node
        if where is not None and pod.phase not in FINISHED_POD_PHASES:
            occupied[pod.key] = (where, pod.requests)
    if pods is None:
        pods = pods_by_key(snapshot)
    for key, placement in result.placements.items():
        occupied[key] = (placement.node, pods[key].requests if key in pods else {})
    for record in result.preemptions:
        for key, node in record.nominations.items():
            occupied[key] = (node, pods[key].requests if key in pods else {})
    return Seen(
        node_specs={n.name: _node_spec(n) for n in snapshot.nodes},
        nodes={n.name: _node_all(n, load_aware) for n in snapshot.nodes},
        occupied=occupied,
        demand=capped_demand(snapshot),
        tables=_tables(snapshot),
    )


@dataclass(frozen=True)
class Changes:
    """What changed between the last round and this snapshot, as far as a job may care."""

    node_specs: bool  # a node added, removed, or changed in labels, taints or cordon
    freed: bool  # anything that may give room: see the module's docstring
    lowest_new: int | None  # the lowest priority of a pod bound since (a possible victim)

    @staticmethod
    def between(
        seen: Seen, snapshot: ClusterSnapshot, pods: Mapping[str, PodInfo], profile: Profile
    ) -> Changes:
        node_specs = {n.name: _node_spec(n) for n in snapshot.nodes} != seen.node_specs
        load_aware = _load_aware(profile)
        freed = (
            node_specs
            or {n.name: _node_all(n, load_aware) for n in snapshot.nodes} != seen.nodes
            or _tables(snapshot) != seen.tables
            or _left(seen.occupied, pods)
            or demand_shrunk(seen.demand, capped_demand(snapshot))
        )
        lowest = min(
            (p.priority for p in _bound(snapshot.pods) if p.key not in seen.occupied),
            default=None,
        )
        return Changes(node_specs=node_specs, freed=freed, lowest_new=lowest)

    def may_help(self, entry: BackedOff) -> bool:
        if entry.node_static:
            return self.node_specs
        if self.freed:
            return True
        return (
            self.lowest_new is not None
            and entry.job.preemption_policy != "Never"
            and self.lowest_new < entry.job.priority
        )


def _left(
    occupied: Mapping[str, tuple[str, Mapping[str, int]]], pods: Mapping[str, PodInfo]
) -> bool:
    """A pod that held a node (bound or nominated) no longer holds it, or holds less."""
    for key, (where, requests) in occupied.items():
        pod = pods.get(key)
        if pod is None or pod.phase in FINISHED_POD_PHASES:
            return True
        if (pod.node or pod.nominated_node) != where:
            return True
        if pod.requests is not requests and pod.requests != requests:
            return True
    return False
