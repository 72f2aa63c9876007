"""Offer slots remembered per pod-template runs and brought up to date node by node.

A slot-limit Filter that declares `slots_by_template` promises what the slot-limit protocol asks
(`scheduler.framework`): a node's count depends only on the pods' templates, in order, and on that
node's own state. Outside a preemption dry run a node's state moves only when pods are taken onto
or given back from it (`CycleState.touched`, the same moves that advance
`CycleState.node_version`). So the counts a plugin gave for the same template runs earlier stay
right on every node not touched since; only the touched nodes are asked again (`slot_limits` over
those node indices). A round of jobs of few shapes (a gang's pods share one template) is then
counted per node moved, not per job over every node.

Dry runs are not remembered here: what they release changes with every search, and the device
fleet keeps its own per-node memory for them. A plugin's answer `None` (it does not constrain the
pods) is remembered as such: for these plugins it depends on the templates alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from scheduler.framework import IntArray
from scheduler.model import JobInfo, PodInfo
from scheduler.state import CycleState

TemplateRuns = tuple[tuple[int, int], ...]
"""Pods as runs of one template, in order: (template id, count)."""

RECOUNT_SHARE = 4  # past 1 / this of the nodes touched, every node is counted again
SHORT_TAIL = 256  # touches since a count read one by one; past this, per node (`_moved_at`)


class CountsByTemplate(Protocol):
    """The part of a slot-limit Filter the memo calls."""

    name: str

    def slot_limits(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> IntArray | None: ...


class _Counted(NamedTuple):
    """One plugin's counts for one template runs key, and when they were counted."""

    slots: IntArray | None
    touched: int  # len(state.touched) then


class SlotMemo:
    """Per round: each opted-in plugin's last counts per template runs."""

    def __init__(self, state: CycleState) -> None:
        self.node_count = len(state.nodes)
        self.everywhere: IntArray = np.arange(self.node_count, dtype=np.int64)
        self._ids: dict[tuple[Any, ...], int] = {}  # template -> its id
        self._id_of: dict[str, int] = {}  # pod key -> its template's id
        self._counted: dict[tuple[str, TemplateRuns], _Counted] = {}
        self._moved_at: IntArray = np.full(self.node_count, -1, dtype=np.int64)
        self._folded = 0  # `state.touched` entries folded into `_moved_at`

    def runs(self, state: CycleState, pods: Sequence[PodInfo]) -> TemplateRuns:
        """`pods` as (template id, count) runs, in order."""
        runs: list[tuple[int, int]] = []
        id_of = self._id_of
        last = -1
        count = 0
        for pod in pods:
            found = id_of.get(pod.key)
            if found is None:
                template = state.template(pod)
                found = self._ids.setdefault(template, len(self._ids))
                id_of[pod.key] = found
            if found == last:
                count += 1
                continue
            if count:
                runs.append((last, count))
            last, count = found, 1
        if count:
            runs.append((last, count))
        return tuple(runs)

    def slot_limits(
        self,
        plugin: CountsByTemplate,
        state: CycleState,
        job: JobInfo,
        pods: Sequence[PodInfo],
        runs: TemplateRuns,
    ) -> IntArray | None:
        """`plugin.slot_limits` over every node, asking it again only on the nodes touched
        since it last counted the same runs. The array is the caller's to read, never to
        change. Not for dry runs (`state.released` set): ask the plugin."""
        key = (plugin.name, runs)
        known = self._counted.get(key)
        slots: IntArray | None
        if known is None:
            slots = plugin.slot_limits(state, job, pods, self.everywhere)
        elif known.slots is None:
            return None  # not constrained: depends on the templates alone
        else:
            if known.touched == len(state.touched):
                return known.slots
            nodes = self._moved_since(state, known.touched)
            if len(nodes) * RECOUNT_SHARE > self.node_count:
                slots = plugin.slot_limits(state, job, pods, self.everywhere)
            else:
                recounted = plugin.slot_limits(state, job, pods, nodes)
                if recounted is None:  # a promise broken: count every node as before
                    slots = plugin.slot_limits(state, job, pods, self.everywhere)
                else:
                    slots = known.slots.copy()
                    slots[nodes] = recounted
        self._counted[key] = _Counted(slots, len(state.touched))
        return slots

    def _moved_since(self, state: CycleState, position: int) -> IntArray:
        """The nodes touched at or after `position` of `state.touched`, sorted. A short tail is
        read as it is; a long one from each node's latest move (`_moved_at`, folded in once)."""
        since = state.touched[position:]
        if len(since) <= SHORT_TAIL:
            return np.array(sorted(set(since)), dtype=np.int64)
        if self._folded < len(state.touched):
            nodes = np.array(state.touched[self._folded :], dtype=np.int64)
            at = np.arange(self._folded, len(state.touched), dtype=np.int64)
            np.maximum.at(self._moved_at, nodes, at)
            self._folded = len(state.touched)
        moved: IntArray = np.flatnonzero(self._moved_at >= position)
        return moved
