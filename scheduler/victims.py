"""Preemption candidates: running jobs as whole victims, and disruption-budget arithmetic.

A victim is a whole job (evicting one pod of a gang evicts the gang). `VictimPool` indexes every
job with pods bound to nodes once per round, with its pods' node indices and request rows as arrays,
so a preemptor's possible victims and the resources they would release per node are array ops.
`BudgetBook` answers how many pods each PodDisruptionBudget still allows to be disrupted;
`overused_quotas` names the quotas a quota within its min may reclaim from (from the quota
plugin's ledger, `Handle.runtime_quota`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from scheduler.arrays import spans
from scheduler.framework import BoolArray, IntArray, QuotaLedger
from scheduler.model import PDBInfo, PodInfo
from scheduler.state import CycleState

SCATTER_ROWS = 2_000  # below this many victim pods a scatter-add beats a bincount per column


class VictimJob(NamedTuple):
    """One running job as a possible victim (a named tuple: a round builds one per job)."""

    id: str
    priority: int  # the highest priority among its running pods
    protected: bool  # some pod carries a non-preemptible label
    quotas: frozenset[str | None]
    pods: tuple[PodInfo, ...]
    holders: Mapping[int, tuple[int, ...]]  # node index -> its pods there (`state.bound_keys` ids)


class VictimPool:
    """All running jobs of the snapshot that could ever be evicted, as arrays."""

    def __init__(self, state: CycleState) -> None:
        grouped: dict[str, list[PodInfo]] = {}
        for idx in sorted(state.bound_on_node):
            for pod in state.bound_on_node[idx]:
                if pod.terminating:
                    continue  # already leaving: never chosen again
                grouped.setdefault(state.job_of_pod.get(pod.key, pod.job_id), []).append(pod)
        self.jobs: list[VictimJob] = []
        rows_node: list[int] = []
        rows_job: list[int] = []
        rows_bound: list[int] = []
        vectors: list[IntArray] = []
        for job_id in sorted(grouped):
            pods = sorted(grouped[job_id], key=lambda p: p.key)
            holders: dict[int, tuple[int, ...]] = {}
            for pod in pods:
                idx = state.node_index[pod.node or ""]
                holders[idx] = (*holders.get(idx, ()), state.bound_id[pod.key])
                rows_node.append(idx)
                rows_job.append(len(self.jobs))
                rows_bound.append(state.bound_id[pod.key])
                vectors.append(state.vector(pod))
            self.jobs.append(
                VictimJob(
                    id=job_id,
                    priority=max(p.priority for p in pods),
                    protected=not all(p.preemptible for p in pods),
                    quotas=frozenset(p.quota for p in pods),
                    pods=tuple(pods),
                    holders=holders,
                )
            )
        n_res = len(state.resources)
        self.pod_node: IntArray = np.array(rows_node, dtype=np.int64)
        self.pod_job: IntArray = np.array(rows_job, dtype=np.int64)
        self.pod_bound: IntArray = np.array(rows_bound, dtype=np.int64)  # `state.bound_keys` index
        self.pod_vec: IntArray = (
            np.array(vectors, dtype=np.int64) if vectors else np.zeros((0, n_res), dtype=np.int64)
        )
        self.priority: IntArray = np.array([j.priority for j in self.jobs], dtype=np.int64)
        self.priorities: list[int] = [j.priority for j in self.jobs]  # the same, for loops
        self.protected: BoolArray = np.array([j.protected for j in self.jobs], dtype=np.bool_)
        self.index = {j.id: i for i, j in enumerate(self.jobs)}
        # A job's pod rows are consecutive: [job_start, job_stop).
        self.job_start: IntArray = np.searchsorted(self.pod_job, np.arange(len(self.jobs)))
        self.job_stop: IntArray = np.searchsorted(
            self.pod_job, np.arange(len(self.jobs)), side="right"
        )
        # Each (node, job) once, sorted by node; a job's priority as its rank among all of them.
        width = np.int64(len(self.jobs) + 1)
        pairs = np.unique(self.pod_node * width + self.pod_job)
        self.pair_node: IntArray = pairs // width
        self.pair_job: IntArray = pairs % width
        # Each node's pairs are [pair_start[node], pair_stop[node]) (`pairs_on`).
        every = np.arange(len(state.nodes), dtype=np.int64)
        self.pair_start: IntArray = np.searchsorted(self.pair_node, every)
        self.pair_stop: IntArray = np.searchsorted(self.pair_node, every, side="right")
        # the last release of each kind (see `release`)
        self._last: dict[Hashable, tuple[BoolArray, IntArray, BoolArray]] = {}
        levels = np.unique(self.priority)
        self.levels: IntArray = levels  # the victims' distinct priorities, ascending
        self.priority_rank: IntArray = np.searchsorted(levels, self.priority).astype(np.int64) + 1
        # Each job's place when victims are kept back: highest priority first, then by id.
        # (`reprieve_order`: the jobs in that order, so sorted ranks map back to jobs.)
        self.reprieve_order: IntArray = np.lexsort((np.arange(len(self.jobs)), -self.priority))
        self.reprieve_rank: IntArray = np.empty(len(self.jobs), dtype=np.int64)
        self.reprieve_rank[self.reprieve_order] = np.arange(len(self.jobs))
        self._requests: dict[int, dict[str, int]] = {}

    def requests(self, job: int) -> dict[str, int]:
        """A job's pods' requests summed, resources in order of first appearance (its pods in
        key order); remembered, as a job is costed in many plans. The caller must not change it."""
        found = self._requests.get(job)
        if found is None:
            found = self._requests[job] = {}
            for pod in self.jobs[job].pods:
                for r, amount in pod.requests.items():
                    found[r] = found.get(r, 0) + int(amount)
        return found

    def pairs_on(self, nodes: IntArray) -> IntArray:
        """The (node, job) pairs (indices into `pair_node` / `pair_job`) of sorted `nodes`."""
        return spans(self.pair_start[nodes], self.pair_stop[nodes])

    def release(
        self, state: CycleState, jobs: IntArray, kind: Hashable = None
    ) -> tuple[IntArray, BoolArray]:
        """What evicting `jobs` (pool indices) frees: resources per node (nodes x resources) and
        the bound pods (a mask over `state.bound_keys`), as `state.releasing` takes them. The
        arrays are the caller's to read, never to change.

        Successive searches release nearly the same jobs (every lower-priority job not yet
        evicted, or those up to one priority band: a release's `kind`), so when few jobs differ
        from the last release of the same kind the answer is that one adjusted by them."""
        chosen: BoolArray = np.zeros(len(self.jobs), dtype=np.bool_)
        chosen[jobs] = True
        last = self._last.get(kind)
        if last is not None:
            last_chosen, last_freed, last_pods = last
            added = np.flatnonzero(chosen & ~last_chosen)
            removed = np.flatnonzero(last_chosen & ~chosen)
            if len(added) + len(removed) < len(jobs) // 4:
                # (order "K": the state's column-major layout kept, see `CycleState`)
                freed, pods = last_freed.copy(order="K"), last_pods.copy()
                self._scatter(freed, pods, added, 1)
                self._scatter(freed, pods, removed, -1)
                self._last[kind] = (chosen, freed, pods)
                return freed, pods
        rows = self._rows(jobs)
        nodes, vectors = self.pod_node[rows], self.pod_vec[rows]
        freed = np.zeros_like(state.allocatable)
        if len(rows) < SCATTER_ROWS:
            np.add.at(freed, nodes, vectors)  # a plan's few victims: scatter their rows
        else:
            for c in range(freed.shape[1]):
                # bincount sums in float64: exact while a node's total stays below 2**53
                freed[:, c] = np.bincount(nodes, weights=vectors[:, c], minlength=len(freed))
        pods = np.zeros(len(state.bound_keys), dtype=np.bool_)
        pods[self.pod_bound[rows]] = True
        self._last[kind] = (chosen, freed, pods)
        return freed, pods

    def _rows(self, jobs: IntArray) -> IntArray:
        """The pod rows of `jobs` (each job's rows are consecutive)."""
        return spans(self.job_start[jobs], self.job_stop[jobs])

    def _scatter(self, freed: IntArray, pods: BoolArray, jobs: IntArray, sign: int) -> None:
        if not len(jobs):
            return
        rows = self._rows(jobs)
        np.add.at(freed, self.pod_node[rows], sign * self.pod_vec[rows])
        pods[self.pod_bound[rows]] = sign > 0


def _budget(value: int | str | None, expected: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(expected * int(value[:-1]) / 100)
    return int(value)


class BudgetBook:
    """Disruptions each PDB still allows, minus evictions already decided this round."""

    def __init__(self, pdbs: Iterable[PDBInfo], pods: Iterable[PodInfo]) -> None:
        self.pdbs = sorted(pdbs, key=lambda b: (b.namespace, b.name))
        self.allowed: dict[str, int] = {}
        pods = list(pods)
        for pdb in self.pdbs:
            matching = [p for p in pods if self.matches(pdb, p) and p.phase != "Succeeded"]
            matching = [p for p in matching if p.phase != "Failed"]
            healthy = sum(1 for p in matching if p.consumes_node and not p.terminating)
            expected = len(matching)
            allowed = healthy
            min_available = _budget(pdb.min_available, expected)
            max_unavailable = _budget(pdb.max_unavailable, expected)
            if min_available is not None:
                allowed = healthy - min_available
            elif max_unavailable is not None:
                allowed = max_unavailable - (expected - healthy)
            self.allowed[self.label(pdb)] = max(0, allowed)

    @staticmethod
    def label(pdb: PDBInfo) -> str:
        return f"{pdb.namespace}/{pdb.name}"

    @staticmethod
    def matches(pdb: PDBInfo, pod: PodInfo) -> bool:
        return pod.namespace == pdb.namespace and all(
            pod.labels.get(k) == v for k, v in pdb.match_labels.items()
        )

    def violations(self, pods: Iterable[PodInfo]) -> dict[str, int]:
        """Per budget, how many pods over its allowance evicting `pods` would disrupt."""
        if not self.pdbs:
            return {}
        counts: dict[str, int] = {}
        for pod in pods:
            for pdb in self.pdbs:
                if self.matches(pdb, pod):
                    name = self.label(pdb)
                    counts[name] = counts.get(name, 0) + 1
        return {n: c - self.allowed[n] for n, c in counts.items() if c > self.allowed[n]}

    def spend(self, pods: Iterable[PodInfo]) -> None:
        for pod in pods:
            for pdb in self.pdbs:
                if self.matches(pdb, pod):
                    name = self.label(pdb)
                    self.allowed[name] = max(0, self.allowed[name] - 1)


def overused_quotas(
    ledger: QuotaLedger | None, quota: str | None, pods: Sequence[PodInfo]
) -> frozenset[str | None]:
    """Quotas using more than their runtime, when `quota` is within its min (it may reclaim)."""
    if ledger is None or quota is None or quota not in ledger.runtime:
        return frozenset()
    minimum = ledger.min_of(quota)
    request: dict[str, int] = {}
    for pod in pods:
        for r, v in pod.requests.items():
            request[r] = request.get(r, 0) + int(v)
    used = ledger.used[quota]
    if not minimum or any(
        used.get(r, 0) + v > minimum[r] for r, v in request.items() if r in minimum
    ):
        return frozenset()
    return frozenset(
        name
        for name, runtime in ledger.runtime.items()
        if name != quota and any(ledger.used[name].get(r, 0) > v for r, v in runtime.items())
    )
