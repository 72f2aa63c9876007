"""NodeResourcesFit plugin. Extension point: Filter (slot-limit protocol).

Counts, for every candidate node at once, how many of a job's pending pods fit by resources (any
resource, extended ones included, plus the `pods` count), taking the pods in placement order and
assuming each accepted pod before the next. Pods with identical templates form runs, so a job of
1,000 identical pods costs one vectorised pass over the nodes, not 1,000. Node masks (selector,
affinity, taints, cordon) apply per run: a pod never counts on a node its template rejects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.causes import INSUFFICIENT, TOO_MANY_PODS
from scheduler.framework import BoolArray, Handle, IntArray, Refusal
from scheduler.model import PODS, JobInfo, PodInfo
from scheduler.state import CycleState
from scheduler.state_keys import StateKey

_BIG = np.int64(1 << 62)


@dataclass(frozen=True)
class PodRun:
    """Consecutive pods (in placement order) sharing one template."""

    vector: IntArray
    count: int
    allowed: BoolArray
    first: PodInfo
    columns: tuple[tuple[int, int], ...] = ()  # the vector's non-zero (column, amount) pairs


# The pod runs remembered per pod list (`pod_runs`).
RUNS: StateKey[dict[tuple[str, ...], list[PodRun]]] = StateKey(
    "NodeResourcesFit/runs", lambda state: {}
)


def pod_runs(handle: Handle, state: CycleState, pods: Sequence[PodInfo]) -> list[PodRun]:
    """The pods as runs of one template; remembered per pod list, as dry runs ask again."""
    cache = state.get_or_create(RUNS)
    keys = tuple(p.key for p in pods)
    cached = cache.get(keys)
    if cached is None:
        cached = cache[keys] = _pod_runs(handle, state, pods)
    return cached


def _pod_runs(handle: Handle, state: CycleState, pods: Sequence[PodInfo]) -> list[PodRun]:
    runs: list[PodRun] = []
    last_key: tuple[Any, ...] | None = None
    count = 0
    first: PodInfo | None = None
    for pod in pods:
        key = state.template(pod)
        if key == last_key:
            count += 1
            continue
        if first is not None:
            runs.append(_run(handle, state, first, count))
        last_key, first, count = key, pod, 1
    if first is not None:
        runs.append(_run(handle, state, first, count))
    return runs


def _run(handle: Handle, state: CycleState, pod: PodInfo, count: int) -> PodRun:
    vector = state.vector(pod)
    columns = tuple((int(c), int(vector[c])) for c in np.flatnonzero(vector > 0))
    return PodRun(vector, count, handle.pod_mask(state, pod).allowed, pod, columns)


def fit_counts(free: IntArray, runs: Sequence[PodRun], node_indices: IntArray) -> IntArray:
    """Sequential fit of `runs` into the rows of `free` (already restricted to the nodes)."""
    total = np.zeros(len(node_indices), dtype=np.int64)
    several = len(runs) > 1
    if several:
        free = free.copy()  # the caller's array is read-only
    everywhere = len(node_indices) == len(runs[0].allowed) if runs else False
    for run in runs:
        need = run.vector
        columns = run.columns or tuple((int(c), int(need[c])) for c in np.flatnonzero(need > 0))
        if columns:
            # a Python int divisor: numpy divides by a scalar far faster than by an array item
            (c, amount), *rest = columns
            fit = free[:, c] // amount
            for c, amount in rest:
                np.minimum(fit, free[:, c] // amount, out=fit)
        else:
            fit = np.full(len(node_indices), _BIG, dtype=np.int64)
        np.minimum(fit, run.count, out=fit)
        np.maximum(fit, 0, out=fit)
        # a rejected node holds none (every node asked: the mask as it is, no gather)
        np.multiply(fit, run.allowed if everywhere else run.allowed[node_indices], out=fit)
        total += fit
        if several:
            free -= fit[:, None] * need[None, :]
    return total


Amounts = tuple[tuple[int, int], ...]
"""A request as (resource column, amount) for its non-zero columns."""


def _bound_amounts(state: CycleState) -> list[Amounts]:
    amounts_of: list[Amounts] = []
    by_row: dict[int, Amounts] = {}  # pods asking the same share one row (`state.vector`)
    for key in state.bound_keys:
        vec = state.vector(state.pods[key])
        amounts = by_row.get(id(vec))
        if amounts is None:
            amounts = by_row[id(vec)] = tuple((int(c), int(vec[c])) for c in np.flatnonzero(vec))
        amounts_of.append(amounts)
    return amounts_of


# Every bound pod's request as `Amounts`, by its `state.bound_keys` position (once a round).
BOUND: StateKey[list[Amounts]] = StateKey("NodeResourcesFit/bound", _bound_amounts)


class RoomCheck:
    """A node's room left after a plan's pods, as bound pods come back (see `node_checks`).
    Plain integers: a draft asks once per victim, and a request touches a few columns."""

    def __init__(self, amounts: list[Amounts], spare: list[int], allowed: bool) -> None:
        self.amounts, self.spare = amounts, spare
        self.short = not allowed or min(spare) < 0  # taking pods back never fixes a shortfall

    def holds_keeping(self, kept: Sequence[int]) -> bool:
        if self.short:
            return False
        if len(kept) == 1:
            spare = self.spare
            return all(spare[c] >= amount for c, amount in self.amounts[kept[0]])
        taken: dict[int, int] = {}
        for i in kept:
            for c, amount in self.amounts[i]:
                taken[c] = taken.get(c, 0) + amount
        return all(self.spare[c] >= amount for c, amount in taken.items())

    def keep(self, kept: Sequence[int]) -> None:
        for i in kept:
            for c, amount in self.amounts[i]:
                self.spare[c] -= amount
                self.short = self.short or self.spare[c] < 0


class NodeResourcesFit:
    name = "NodeResourcesFit"
    extension_points = frozenset({"Filter"})
    # A node's count reads its free resources (released ones in a dry run) and the pods' runs of
    # one template (request row, node mask): `scheduler.slot_memo` may recount only moved nodes.
    slots_by_template = True
    pod_fields = ("requests",)  # what its count reads of a pod (`state.template_fields`)

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        self.handle = handle

    def slot_limits(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> IntArray | None:
        everywhere = len(node_indices) == len(state.nodes)
        free = state.free(None if everywhere else node_indices)
        return fit_counts(free, pod_runs(self.handle, state, pods), node_indices)

    def node_checks(
        self, state: CycleState, on_node: Mapping[int, Sequence[PodInfo]]
    ) -> dict[int, RoomCheck]:
        """Per node, all its pods fit by resources when their summed request fits what is free
        there, the dry run's released pods included (every node of the plan in one pass)."""
        nodes = list(on_node)
        if not nodes:
            return {}
        rows = np.array(nodes, dtype=np.int64)
        # pods of one template ask the same: count them per node, subtract once per template
        counts: dict[int, list[int]] = {}  # by `state.template_id`
        firsts: dict[int, PodInfo] = {}
        for i, node in enumerate(nodes):
            for pod in on_node[node]:
                key = state.template_id(pod)
                column = counts.get(key)
                if column is None:
                    column = counts[key] = [0] * len(nodes)
                    firsts[key] = pod
                column[i] += 1
        room = state.free(rows).copy()
        allowed = np.ones(len(nodes), dtype=np.bool_)
        for key, column in counts.items():
            pod = firsts[key]
            many = np.array(column, dtype=np.int64)
            room -= many[:, None] * state.vector(pod)[None, :]
            allowed &= (many == 0) | self.handle.pod_mask(state, pod).allowed[rows]
        amounts = state.get_or_create(BOUND)
        spare, fits = room.tolist(), allowed.tolist()
        return {node: RoomCheck(amounts, spare[i], fits[i]) for i, node in enumerate(nodes)}

    def explain(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> dict[Refusal, int]:
        """Reason counts over `node_indices` (nodes where not even the first pod fits, which
        every node-mask Filter allows: the framework counts the others under those Filters):
        once per resource the first pod lacks there, as kube-scheduler reports them
        (`Insufficient` with the resource, `TooManyPods`).
        """
        if not pods or len(node_indices) == 0:
            return {}
        first = pods[0]
        counts: dict[Refusal, int] = {}
        asked = np.zeros(len(state.nodes), dtype=np.bool_)
        asked[node_indices] = True
        need = state.vector(first)
        free = state.free()
        for c in np.flatnonzero(need > 0):
            short = int(np.count_nonzero(asked & (free[:, c] < need[c])))
            if short:
                r = state.resources[int(c)]
                refusal = (
                    Refusal(TOO_MANY_PODS, "Too many pods", r)
                    if r == PODS
                    else Refusal(INSUFFICIENT, f"Insufficient {r}", r)
                )
                counts[refusal] = counts.get(refusal, 0) + short
        return counts
