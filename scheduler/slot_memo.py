"""Offer slots remembered per pod-template runs and brought up to date node by node.

A slot-limit Filter that declares `slots_by_template` promises what the slot-limit protocol asks
(`scheduler.framework`): a node's count depends only on the pods' templates, in order, and on that
node's own state. Outside a preemption dry run a node's state moves only when pods are taken onto
or given back from it (`CycleState.touched`, the same moves that advance
`CycleState.node_version`). So the counts a plugin gave for the same template runs earlier stay
right on every node not touched since; only the touched nodes are asked again (`slot_limits` over
those node indices). A round of jobs of few shapes (a gang's pods share one template) is then
counted per node moved, not per job over every node.

A preemption dry run (`CycleState.releasing`) counts with some bound pods gone, so its counts are
kept apart from the others, with the release they were counted under. The next dry run of the same
template runs, usually the next search, releases nearly the same pods (every lower-priority job not
yet evicted): a node is asked again when it was touched since, or when the pods released on it or
the resources freed there differ from that release's. A plugin's answer `None` (it does not
constrain the pods) is remembered as such: for these plugins it depends on the templates alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from scheduler.framework import BoolArray, IntArray
from scheduler.model import JobInfo, PodInfo
from scheduler.state import CycleState

TemplateRuns = tuple[tuple[int, int], ...]
"""Pods as runs of one template, in order: (template id (`CycleState.template_id`), count)."""

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
    released: IntArray | None = None  # a dry run's `state.released` then (None: no dry run)
    released_mask: BoolArray | None = None  # and its `state.released_mask`


class SlotMemo:
    """Per round: each opted-in plugin's last counts per template runs."""

    def __init__(self, state: CycleState) -> None:
        self.node_count = len(state.nodes)
        self.everywhere: IntArray = np.arange(self.node_count, dtype=np.int64)
        self.everywhere.flags.writeable = False  # handed to every plugin: read, never changed
        self._runs: dict[tuple[str, ...], TemplateRuns] = {}  # pod keys -> `runs`
        # The framework's node-mask cap per runs (`Framework.offer_slots`; None: no mask binds).
        self.mask_caps: dict[TemplateRuns, IntArray | None] = {}
        self._counted: dict[tuple[Any, ...], _Counted] = {}  # (.., dry run, its kind)
        self._moved_at: IntArray = np.full(self.node_count, -1, dtype=np.int64)
        self._folded = 0  # `state.touched` entries folded into `_moved_at`
        # The last two releases compared (`_released_apart`) and the nodes where they differ:
        # every plugin of a dry run compares the same two.
        self._apart: tuple[tuple[Any, ...], IntArray] | None = None

    def runs(self, state: CycleState, pods: Sequence[PodInfo]) -> TemplateRuns:
        """`pods` as (template id, count) runs, in order; remembered per list of pod keys (a
        pod's template is fixed for the round, and a job's searches ask again and again)."""
        keys = tuple([pod.key for pod in pods])
        found = self._runs.get(keys)
        if found is None:
            found = self._runs[keys] = self._count_runs(state, pods)
        return found

    def _count_runs(self, state: CycleState, pods: Sequence[PodInfo]) -> TemplateRuns:
        runs: list[tuple[int, int]] = []
        template_id = state.template_id
        last = -1
        count = 0
        for pod in pods:
            found = template_id(pod)
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
        since it last counted the same runs (in a dry run: the same runs in a dry run, and
        also the nodes whose release differs). The array is the caller's to read, never to
        change."""
        dry = state.released is not None
        # a dry run is compared with the last one of its kind (`CycleState.releasing`)
        key = (plugin.name, runs, dry, state.release_kind if dry else None)
        known = self._counted.get(key)
        slots: IntArray | None
        if known is None:
            slots = plugin.slot_limits(state, job, pods, self.everywhere)
        elif known.slots is None:
            return None  # not constrained: depends on the templates alone
        else:
            nodes = self._moved_since(state, known.touched)
            if dry:
                nodes = self._released_apart(state, known, nodes)
            if not len(nodes):
                slots = known.slots
            elif len(nodes) * RECOUNT_SHARE > self.node_count:
                slots = plugin.slot_limits(state, job, pods, self.everywhere)
            else:
                recounted = plugin.slot_limits(state, job, pods, nodes)
                if recounted is None:  # a promise broken: count every node as before
                    slots = plugin.slot_limits(state, job, pods, self.everywhere)
                else:
                    slots = known.slots.copy()
                    slots[nodes] = recounted
        self._counted[key] = _Counted(
            slots, len(state.touched), state.released, state.released_mask
        )
        return slots

    def _released_apart(self, state: CycleState, known: _Counted, moved: IntArray) -> IntArray:
        """`moved` and the nodes where this dry run's release differs from the one `known` was
        counted under (released pods or freed resources), sorted; every node when either
        release is not fully given. The releases are kept by reference: `state.releasing`
        takes arrays that are never changed."""
        released, mask = state.released, state.released_mask
        before, before_mask = known.released, known.released_mask
        if released is None or mask is None or before is None or before_mask is None:
            return self.everywhere  # a release not fully given: nothing to compare with
        if released is before and mask is before_mask:
            return moved
        pair = (before, before_mask, released, mask)
        last = self._apart
        if last is None or any(a is not b for a, b in zip(last[0], pair, strict=True)):
            nodes: BoolArray = (released != before).any(axis=1)
            nodes[state.bound_node[mask != before_mask]] = True
            last = self._apart = (pair, np.flatnonzero(nodes))
        if not len(moved):
            return last[1]
        apart: IntArray = np.union1d(moved, last[1])
        return apart

    def _moved_since(self, state: CycleState, position: int) -> IntArray:
        """The nodes touched at or after `position` of `state.touched`, sorted. A short tail is
        read as it is; a long one from each node's latest move (`_moved_at`, folded in once)."""
        since = state.touched[position:]
        if not since:
            return np.zeros(0, dtype=np.int64)
        if len(since) <= SHORT_TAIL:
            return np.array(sorted(set(since)), dtype=np.int64)
        if self._folded < len(state.touched):
            nodes = np.array(state.touched[self._folded :], dtype=np.int64)
            at = np.arange(self._folded, len(state.touched), dtype=np.int64)
            np.maximum.at(self._moved_at, nodes, at)
            self._folded = len(state.touched)
        moved: IntArray = np.flatnonzero(self._moved_at >= position)
        return moved
