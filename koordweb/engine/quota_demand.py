"""Quota demand as the engine's runtime quota reads it, summed once per snapshot: each quota's
demand (`demand_sums`, capped at its max in `capped_demand`), a set of pods' own demand
(`pods_demand`), and which waiting jobs may be left out of a round without changing any quota's
capped demand (`quota_neutral`). The back-off (`backoff.py`) and the what-if ask these.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from operator import attrgetter, is_not
from typing import Any

from scheduler.api import UNBOUNDED, QuotaTree
from scheduler.model import ClusterSnapshot, JobInfo, PodInfo
from scheduler.vocabulary import FINISHED_POD_PHASES

INITIAL_SECONDS = 1.0  # kube-scheduler's podInitialBackoffDuration
MAX_SECONDS = 300.0  # podMaxInUnschedulablePodsDuration: a job is tried again at least this often
# Filters whose verdict on a node reads only the node's spec and the pod's: nothing but a node
# change can turn their "no" into a "yes" (kube's queueing hints for these plugins).
NODE_STATIC_FILTERS = frozenset({"NodeUnschedulable", "NodeAffinity", "TaintToleration"})
HELD_CACHE_SECONDS = 600

Demand = Mapping[str, Mapping[str, int]]  # quota name -> resource -> amount
_node = attrgetter("node")


def capped_demand(snapshot: ClusterSnapshot) -> dict[str, dict[str, int]]:
    """Each quota's demand as the engine's runtime quota reads it: bound and pending pods'
    requests (children rolled up), capped at the quota's max."""
    if not snapshot.quotas:
        return {}
    tree = QuotaTree.build(snapshot.quotas)
    return {
        name: {r: min(v, int(tree.quotas[name].max.get(r, UNBOUNDED))) for r, v in amounts.items()}
        for name, amounts in demand_sums(snapshot).items()
    }


_requests = attrgetter("requests")
_quota = attrgetter("quota")
_phase = attrgetter("phase")
# The last snapshot's sums: a round asks for them three times (changes, hold, record).
_sums_memo: tuple[tuple[PodInfo, ...], tuple[Any, ...], dict[str, dict[str, int]]] | None = None


def demand_sums(snapshot: ClusterSnapshot) -> dict[str, dict[str, int]]:
    """What `quota_sums(tree, snapshot.pods, include_pending=True)` sums (per quota, children
    rolled up: requests of bound and pending pods), counted by pods of one quota sharing one
    requests document (the assembly gives the pods of a shape one), kept for the snapshot last
    asked about. Read only: callers copy what they change."""
    global _sums_memo
    memo = _sums_memo
    if memo is not None and memo[0] is snapshot.pods and memo[1] is snapshot.quotas:
        return memo[2]
    tree = QuotaTree.build(snapshot.quotas)
    pods = snapshot.pods
    documents = list(map(_requests, pods))
    by_id = dict(zip(map(id, documents), documents, strict=True))
    # One count per (quota, requests document, bound, phase): a handful of keys for 4,000 pods.
    counts = Counter(
        zip(
            map(_quota, pods),
            map(id, documents),
            map(is_not, map(_node, pods), repeat(None)),
            map(_phase, pods),
            strict=True,
        )
    )
    sums: dict[str, dict[str, int]] = {name: {} for name in tree.quotas}
    chains: dict[str, list[str]] = {}
    for (quota, document, bound, phase), count in counts.items():
        # PodInfo.consumes_node or PodInfo.is_pending
        if quota not in tree.quotas or not (
            (bound and phase not in FINISHED_POD_PHASES) or (not bound and phase == "Pending")
        ):
            continue
        chain = chains.get(quota)
        if chain is None:
            chain = chains[quota] = tree.ancestors(quota)
        for name in chain:
            total = sums[name]
            for r, v in by_id[document].items():
                total[r] = total.get(r, 0) + count * int(v)
    _sums_memo = (snapshot.pods, snapshot.quotas, sums)
    return sums


def pods_demand(pods: Iterable[PodInfo]) -> dict[str, dict[str, int]]:
    """Pods' requests summed per their own quota (pods of no quota left out)."""
    out: dict[str, dict[str, int]] = {}
    for pod in pods:
        if pod.quota is not None:
            total = out.setdefault(pod.quota, {})
            for r, v in pod.requests.items():
                total[r] = total.get(r, 0) + int(v)
    return out


def demand_shrunk(
    before: Mapping[str, Mapping[str, int]], now: Mapping[str, Mapping[str, int]]
) -> bool:
    """A quota's capped demand fell (work left a queue): others' runtime quota may grow."""
    for name, amounts in before.items():
        current = now.get(name, {})
        if any(current.get(r, 0) < v for r, v in amounts.items()):
            return True
    return False


def quota_neutral(
    snapshot: ClusterSnapshot,
    candidates: Iterable[JobInfo],
    pods: Mapping[str, PodInfo],
    demand_of: Callable[[JobInfo], Demand] | None = None,
) -> list[JobInfo]:
    """The candidates that may be left out without changing any quota's capped demand, taken
    last in queue order first (so a quota keeps in its first jobs). `demand_of(job)`: the job's
    requests per its pods' own quota, kept from its back-off (else summed from `pods`)."""
    ordered = sorted(candidates, key=lambda j: (j.priority, -j.submission_order, j.id))
    if not ordered:
        return []
    if not snapshot.quotas:
        return ordered
    tree = QuotaTree.build(snapshot.quotas)
    sums = {name: dict(amounts) for name, amounts in demand_sums(snapshot).items()}
    chains: dict[str, list[str]] = {}
    out: list[JobInfo] = []
    for job in ordered:
        own = (
            demand_of(job)
            if demand_of is not None
            else pods_demand(pods[k] for k in job.pod_keys if k in pods)
        )
        need: dict[str, dict[str, int]] = {}
        for quota, amounts in own.items():
            if quota not in tree.quotas:
                continue
            chain = chains.get(quota)
            if chain is None:
                chain = chains[quota] = tree.ancestors(quota)
            for name in chain:
                total = need.setdefault(name, {})
                for r, v in amounts.items():
                    total[r] = total.get(r, 0) + int(v)
        if all(
            sums[name].get(r, 0) - v >= max(1, int(tree.quotas[name].max.get(r, UNBOUNDED)))
            for name, amounts in need.items()
            for r, v in amounts.items()
            if v
        ):
            for name, amounts in need.items():
                for r, v in amounts.items():
                    sums[name][r] = sums[name].get(r, 0) - v
            out.append(job)
    return out
