"""Many nodes' devices at once: usage per node, grouped so equal nodes are evaluated once.

A round asks "how many of these pods fit each node's cards" for thousands of nodes and every job.
Nodes with the same device layout and the same usage give the same answer, so `DeviceFleet` keeps
every device node in a group keyed by (layout, usage fingerprint), computes a count or a score
once per group and spreads it over the nodes with numpy. Only the nodes a placement touches move
to another group. The allocation itself is always the real allocator's.

A preemption dry run asks the same question with some bound pods gone. The fleet knows which bound
pods hold which cards (`holders`, fixed for the round), marks each as one bit of its node, and
remembers per node and pod shape the answer for (group, released bits): between two dry runs only
the nodes a placement or an eviction touched are counted again, and those that end in the same
state (often: idle) share one count.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.arrays import spans
from scheduler.causes import INSUFFICIENT, NODE_REJECTED
from scheduler.devices.allocator import (
    DeviceAllocation,
    allocate,
    count_fits,
    explain,
    plan_devices,
    score_request,
)
from scheduler.devices.memory import (
    SATURATE,
    FleetMemory,
    GroupCounts,
    GroupScores,
    Memo,
    Runs,
    answers,
    shape_key,
)
from scheduler.devices.model import AllocatedDevice, DeviceUsage, NodeDevices, Shortage
from scheduler.devices.names import Scoring
from scheduler.devices.request import DeviceRequest
from scheduler.framework import Refusal

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Held = tuple[AllocatedDevice, ...]
UIntArray = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]

MAX_MEMOS = 256  # released-slot memos (a shape and a release kind each) kept at once
BITS = 64  # holders a node can name in one released-bits word; more go the exact, slower way


class DeviceFleet:
    """Device nodes of one round, by node index; the only mutable part is their usage."""

    def __init__(
        self,
        node_count: int,
        nodes: Mapping[int, NodeDevices],
        usage: Mapping[int, DeviceUsage],
        scoring: Scoring = "LeastAllocated",
        memory: FleetMemory | None = None,
    ) -> None:
        self.node_count = node_count
        # Counts and scores by content, possibly kept from earlier rounds (see `FleetMemory`).
        self.memory = memory if memory is not None else FleetMemory()
        self.nodes = dict(nodes)
        self.usage = {idx: usage.get(idx) or DeviceUsage(node) for idx, node in nodes.items()}
        self.scoring = scoring
        self.device_nodes: IntArray = np.array(sorted(nodes), dtype=np.int64)
        self.group: IntArray = np.full(node_count, -1, dtype=np.int64)
        self._every: IntArray = np.arange(node_count, dtype=np.int64)
        self._layout_seen: dict[tuple[Any, ...], int] = {}
        self._layout_of = {idx: self._layout_id(node) for idx, node in self.nodes.items()}
        self._groups: dict[tuple[Any, ...], int] = {}
        self._members: list[tuple[NodeDevices, DeviceUsage]] = []
        self._group_keys: list[tuple[Any, ...]] = []  # group -> its `_key`, the memory's key
        self._counts: dict[Runs, GroupCounts] = {}  # shape -> per group (fits, limit)
        self._scores: dict[DeviceRequest, GroupScores] = {}  # request -> per group score
        # Usage states (layout + usage fingerprint) as small ints, so the dry runs' memos hash
        # an int instead of the fingerprint's nested tuples.
        self._state_ids: dict[tuple[Any, ...], int] = {}
        self._state_keys: list[tuple[Any, ...]] = []  # state id -> its `_key`
        self._plans: dict[tuple[Any, ...], DeviceAllocation | None] = {}
        self._held_plans: dict[tuple[int, DeviceRequest], Held | None] = {}
        self._memos: dict[tuple[Runs, Hashable], Memo] = {}  # by shape and release kind
        # For preemption drafts (`CardCheck`): usage with some pods gone, and the answers.
        self._freed_usage: dict[tuple[Any, ...], tuple[DeviceUsage, int]] = {}
        self._freed_for: BoolArray | None = None  # the release `_freed_at` answers for
        self._freed_at: dict[int, tuple[int, tuple[DeviceUsage, int]]] = {}  # node -> (group, ..)
        self._taken: dict[tuple[int, tuple[int, ...]], tuple[DeviceUsage, int]] = {}
        self._answers: dict[tuple[Any, ...], bool] = {}
        self._backs: dict[int, dict[tuple[int, ...], tuple[int, ...]]] = {}  # see `CardCheck`
        self._shape_ids: dict[Runs, int] = {}
        self._state_counts: dict[tuple[int, int], tuple[int, int]] = {}  # see `_usage_count`
        self._runs_shape: dict[int, tuple[Runs, Runs, int, int]] = {}
        self._reasons: dict[DeviceRequest, GroupReasons] = {}  # request -> group -> reason
        self.track_holders({})
        for idx in self.nodes:
            self._regroup(idx)

    def track_holders(self, holders: Mapping[int, Sequence[tuple[int, Held]]]) -> None:
        """Per node, (bound pod id, devices) of the bound pods a dry run may release, the ids
        being positions in the mask `slots` is given (set once their cards are known)."""
        # Per node, bound pod id -> its devices, in the order given (a holder's bit position).
        self._holders: dict[int, dict[int, Held]] = {idx: dict(holders[idx]) for idx in holders}
        # Equal holdings as one int (bound pod id -> holding id), so a check's question hashes
        # ints, not tuples of devices.
        interned: dict[Held, int] = {}
        by_identity: dict[int, int] = {}  # many holders share one planned tuple
        self._holding: dict[int, int] = {}
        for entries in self._holders.values():
            for pod_id, held in entries.items():
                found = by_identity.get(id(held))
                if found is None:
                    found = by_identity[id(held)] = interned.setdefault(held, len(interned))
                self._holding[pod_id] = found
        self._holdings: list[Held] = list(interned)
        ids: list[int] = []
        where: list[int] = []
        bits: list[int] = []
        for idx in sorted(self._holders):
            entries = self._holders[idx]
            for k, pod_id in enumerate(entries):
                ids.append(pod_id)
                where.append(idx)
                bits.append(1 << k if len(entries) <= BITS else 0)
        # Sorted by node, so the released rows of one node stay together: node i's rows are
        # [_holder_start[i], _holder_stop[i]).
        self._holder_id: IntArray = np.array(ids, dtype=np.int64)
        self._holder_node: IntArray = np.array(where, dtype=np.int64)
        self._holder_bit: UIntArray = np.array(bits, dtype=np.uint64)
        self._holder_start: IntArray = np.searchsorted(self._holder_node, self._every)
        self._holder_stop: IntArray = np.searchsorted(self._holder_node, self._every, "right")
        self._wide = {idx for idx, entries in self._holders.items() if len(entries) > BITS}
        self._memos.clear()
        self._freed_usage.clear()
        self._freed_for, self._freed_at = None, {}
        self._backs = {}
        self._taken.clear()

    # --- usage ----------------------------------------------------------------------------------
    def apply(self, idx: int, devices: Held) -> None:
        self.usage[idx].apply(devices)
        self._regroup(idx)

    def release(self, idx: int, devices: Held) -> None:
        self.usage[idx].release(devices)
        self._regroup(idx)

    def allocate(self, idx: int, request: DeviceRequest) -> DeviceAllocation | None:
        """What one pod of `request` gets on node `idx` now (usage unchanged; None: no fit).

        The choice depends only on the node's layout and usage, so nodes of one group share it.
        """
        key = (int(self.group[idx]), request)
        if key not in self._plans:
            node, usage = self._members[key[0]]
            self._plans[key] = allocate(node, usage, request, self.scoring)
        shared = self._plans[key]
        if shared is None:
            return None
        return DeviceAllocation(self.nodes[idx].node, shared.devices, dict(shared.annotations))

    def plan(self, idx: int, request: DeviceRequest) -> Held | None:
        """The devices `allocate` would give on node `idx` now, without its annotations."""
        key = (int(self.group[idx]), request)
        if key not in self._held_plans:
            node, usage = self._members[key[0]]
            self._held_plans[key] = plan_devices(node, usage, request, self.scoring)
        return self._held_plans[key]

    # --- questions over many nodes --------------------------------------------------------------
    def slots(
        self,
        node_indices: IntArray,
        runs: Runs,
        released: BoolArray | None = None,
        kind: Hashable = None,
    ) -> IntArray:
        """Per position, how many pods of `runs` fit that node's devices in order (0: none).

        `released` marks the bound pods (by the ids given as `holders`) a dry run treats as gone;
        `kind`, the sort of release it is (`CycleState.releasing`): counts are remembered per
        kind, as releases of one kind differ from each other in a few nodes.
        """
        shape, asked = shape_key(runs)
        groups = self.group[node_indices]
        table = self._counts.get(shape)
        if table is None:
            table = self._counts[shape] = GroupCounts()
        fits, limit = table.grown(len(self._members))
        # A group's count answers when it filled up before its limit or reached `asked`; the
        # appended slot (index -1) stands for the nodes without devices.
        answered = np.append((fits >= 0) & ((fits < limit) | (fits >= asked)), True)
        missing = groups[~answered[groups]]
        if len(missing):
            for g in np.unique(missing).tolist():
                node, usage = self._members[g]
                fits[g], limit[g] = self.memory.count(
                    self._group_keys[g],
                    shape,
                    self.scoring,
                    asked,
                    lambda: self._count(node, usage, shape, asked),  # noqa: B023 (called here)
                )
        result: IntArray = np.append(np.minimum(fits, asked), 0)[groups]
        if released is not None and len(self._holder_id):
            self._released_slots(node_indices, shape, asked, released, result, kind)
        return result

    def _released_slots(
        self,
        node_indices: IntArray,
        shape: Runs,
        asked: int,
        released: BoolArray,
        result: IntArray,
        kind: Hashable = None,
    ) -> None:
        """Overwrite `result` where the dry run frees cards, remembered per node and shape (the
        next dry run differs in a few nodes)."""
        if len(node_indices) == self.node_count and np.array_equal(node_indices, self._every):
            rows = None  # every node asked, in order (offer slots): positions are node indices
            on = released[self._holder_id]
        else:  # the holders of the nodes asked, by position
            first, last = self._holder_start[node_indices], self._holder_stop[node_indices]
            rows = spans(first, last)
            on = released[self._holder_id[rows]]
        if not on.any():
            return
        if rows is None:
            owner, bits = self._holder_node[on], self._holder_bit[on]
        else:
            asked_at = np.arange(len(node_indices), dtype=np.int64)
            owner, bits = np.repeat(asked_at, last - first)[on], self._holder_bit[rows[on]]
        starts = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
        positions = owner[starts]  # the positions whose node the dry run frees cards on
        nodes = positions if rows is None else node_indices[positions]
        nodes_bits: UIntArray = np.bitwise_or.reduceat(bits, starts)
        memo = self._memos.get((shape, kind))
        if memo is None:
            if len(self._memos) >= MAX_MEMOS:  # many shapes and kinds: start again
                self._memos.clear()
            memo = self._memos[shape, kind] = Memo(self.node_count)
        groups = self.group[nodes]
        fits, known = memo.recall(nodes, groups, nodes_bits, asked)
        missing = np.flatnonzero(~known)
        if len(missing):
            shape_id = self._shape_id(shape)
            counted = [
                self._usage_count(idx, *self._freed(idx, released), shape, shape_id, asked)
                for idx in nodes[missing].tolist()
            ]
            fits[missing], limits = np.array(counted, dtype=np.int64).T
            narrow = np.array([idx not in self._wide for idx in nodes[missing].tolist()])
            kept = missing[narrow]
            memo.remember_all(
                nodes[kept], groups[kept], nodes_bits[kept], fits[kept], limits[narrow]
            )
        result[positions] = np.minimum(fits, asked)

    def _usage_count(
        self, idx: int, usage: DeviceUsage, key: int, shape: Runs, shape_id: int, asked: int
    ) -> tuple[int, int]:
        """(fits, limit) on node `idx` as if its usage were `usage` (`key`: its `_state_id`;
        `shape_id`: the shape's `_shape_id`). A dry run frees many nodes into the same few
        states (often: idle); equal layout and usage give equal counts, so each state is
        counted once (see `FleetMemory`), and asked again under the two small ints."""
        found = self._state_counts.get((key, shape_id))
        if found is None or not answers(found, asked):
            found = self._state_counts[key, shape_id] = self.memory.count(
                self._state_keys[key],
                shape,
                self.scoring,
                asked,
                lambda: self._count(self.nodes[idx], usage, shape, asked),
            )
        return found

    def _freed(self, idx: int, released: BoolArray) -> tuple[DeviceUsage, int]:
        """Node `idx`'s usage with the `released` pods' cards given back, and its state id;
        never to be changed, and shared by the nodes of one group that give back equal
        holdings (same layout, so the usage reads the same on either node). A dry run asks
        about a node again and again (its offer slots, each plan's card check): the answer is
        kept for the dry run's `released` array (never changed: `CycleState.releasing`) and
        the node's group."""
        if released is not self._freed_for:
            self._freed_for, self._freed_at = released, {}
        group = int(self.group[idx])
        known = self._freed_at.get(idx)
        if known is not None and known[0] == group:
            return known[1]
        held_by = self._holders.get(idx, {})
        holding = self._holding
        gone = sorted(holding[pod_id] for pod_id in held_by if released[pod_id])
        question = (group, *gone)
        found = self._freed_usage.get(question)
        if found is None:
            usage = self.usage[idx].copy()
            for holding_id in gone:
                usage.release(self._holdings[holding_id])
            found = self._freed_usage[question] = (usage, self._state_id(idx, usage))
        self._freed_at[idx] = (group, found)
        return found

    def _taken_back(
        self, idx: int, usage: DeviceUsage, key: int, back: tuple[int, ...]
    ) -> tuple[DeviceUsage, int]:
        """Node `idx`'s `usage` (state id `key`) with the holdings `back` taken again, and its
        state id; never to be changed. The result depends only on the state and the holdings
        (the state names the layout and every usage count), so it is shared by every check
        that asks the same."""
        if not back:
            return usage, key
        question = (key, back)
        found = self._taken.get(question)
        if found is None:
            taken = usage.copy()
            for holding_id in back:
                taken.apply(self._holdings[holding_id])
            found = self._taken[question] = (taken, self._state_id(idx, taken))
        return found

    def _shape_of(self, runs: Runs) -> tuple[Runs, int, int]:
        """`shape_key(runs)` and the shape's id, remembered per runs object (the plugin keeps
        one per pod list for the round, so its id is not reused meanwhile)."""
        found = self._runs_shape.get(id(runs))
        if found is None or found[0] is not runs:
            shape, asked = shape_key(runs)
            found = self._runs_shape[id(runs)] = (runs, shape, asked, self._shape_id(shape))
        return found[1], found[2], found[3]

    def _shape_id(self, shape: Runs) -> int:
        found = self._shape_ids.get(shape)
        if found is None:
            found = self._shape_ids[shape] = len(self._shape_ids)
        return found

    def card_check(self, idx: int, runs: Runs, released: BoolArray) -> CardCheck:
        """Whether all pods of `runs` fit node `idx`'s cards with the bound pods marked in
        `released` (by the ids given to `track_holders`) gone; see `CardCheck`."""
        return CardCheck(self, idx, runs, released)

    def scores(self, node_indices: IntArray, request: DeviceRequest) -> FloatArray:
        """Per position, the node score for one pod of `request` (0 where it does not fit)."""
        groups = self.group[node_indices]
        table = self._scores.get(request)
        if table is None:
            table = self._scores[request] = GroupScores()
        scores = table.grown(len(self._members))
        known = np.append(~np.isnan(scores), True)  # index -1: nodes without devices
        missing = groups[~known[groups]]
        if len(missing):
            for g in np.unique(missing).tolist():
                node, usage = self._members[g]
                scores[g] = self.memory.score(
                    self._group_keys[g],
                    request,
                    self.scoring,
                    lambda: _score(node, usage, request, self.scoring),  # noqa: B023
                )
        result: FloatArray = np.append(scores, 0.0)[groups]
        return result

    def reasons(self, node_indices: IntArray, request: DeviceRequest) -> dict[Refusal, int]:
        """Why one pod of `request` does not fit, counted over the device nodes given (each
        reason in the order of the first group, by index, that has it): a shortage of a device
        type as `Insufficient` under kube-scheduler's words ("Insufficient gpu"), any other
        refusal as `NodeRejected` in the allocator's words."""
        groups = self.group[node_indices]
        counts = np.bincount(groups[groups >= 0], minlength=len(self._members))
        table = self._reasons.get(request)
        if table is None:
            table = self._reasons[request] = GroupReasons()
        present = np.flatnonzero(counts)
        ids = table.grown(len(self._members))
        for g in present[ids[present] < 0].tolist():
            node, usage = self._members[g]
            ids[g] = table.id_of(_refusal(explain(node, usage, request)))
        found = ids[present]
        totals = np.bincount(found, weights=counts[present], minlength=len(table.names))
        reason_ids, first = np.unique(found, return_index=True)
        reasons: dict[Refusal, int] = {}
        for r in reason_ids[np.argsort(first)].tolist():
            refusal = table.names[r]
            if refusal is not None:
                reasons[refusal] = int(totals[r])  # float64 sums of node counts: exact
        return reasons

    # --- internals ------------------------------------------------------------------------------
    def _count(
        self, node: NodeDevices, usage: DeviceUsage, shape: Runs, asked: int
    ) -> tuple[int, int]:
        """(pods of `shape` that fit, the limit counted to); see `shape_key` and `answers`."""
        if len(shape) == 1 and shape[0][1] == 0:
            limit = max(asked, SATURATE)
            return count_fits(node, usage, shape[0][0], limit, self.scoring), limit
        trial = usage.copy()
        total = 0
        for request, count in shape:
            for _ in range(count):
                allocation = allocate(node, trial, request, self.scoring)
                if allocation is None:
                    break
                trial.apply(allocation.devices)
                total += 1
        return total, asked

    def _layout_id(self, node: NodeDevices) -> int:
        # Nodes built from one template share their device tuples: known by identity (the
        # fleet holds every node, so an id is not reused while it lives).
        same = (
            id(node.gpus),
            id(node.rdmas),
            node.vendor,
            node.model,
            id(node.partitions),
            node.partition_policy,
            id(node.ascend),
            node.isolation_provider,
        )
        known = self._layout_seen.get(same)
        if known is None:
            known = self._layout_seen[same] = self.memory.layout_id(node)
        return known

    def _key(self, idx: int, usage: DeviceUsage) -> tuple[Any, ...]:
        """A node's group key: its layout and a fingerprint of its usage. One flat tuple (the
        layout fixes every list's length, so the concatenation is unambiguous) hashes faster
        than a tuple of tuples."""
        counts = (
            usage.core + usage.memory + usage.ratio + usage.npu_core + usage.npu_cpu + usage.dvpp
        )
        if not usage.rdma:
            return (self._layout_of[idx], *counts)
        vfs = tuple(frozenset(v) for v in usage.vfs)
        return (self._layout_of[idx], *counts, *usage.rdma, vfs)

    def _state_id(self, idx: int, usage: DeviceUsage) -> int:
        """A small int naming (layout, usage) for the memos of dry runs."""
        key = self._key(idx, usage)
        found = self._state_ids.get(key)
        if found is None:
            found = self._state_ids[key] = len(self._state_ids)
            self._state_keys.append(key)
        return found

    def _regroup(self, idx: int) -> None:
        usage = self.usage[idx]
        key = self._key(idx, usage)
        group = self._groups.get(key)
        if group is None:
            group = len(self._members)
            self._groups[key] = group
            # A frozen copy: the member node's usage keeps changing, the group's must not.
            self._members.append((self.nodes[idx], usage.copy()))
            self._group_keys.append(key)
        self.group[idx] = group


class GroupReasons:
    """For one device request: per group, the id of why a pod does not fit there (-1: not yet
    asked; the reason None means it fits), and the reasons by id."""

    def __init__(self) -> None:
        self.ids: IntArray = np.full(0, -1, dtype=np.int64)
        self.names: list[Refusal | None] = []
        self._id: dict[Refusal | None, int] = {}

    def grown(self, groups: int) -> IntArray:
        if len(self.ids) < groups:
            extra = max(groups - len(self.ids), len(self.ids))
            self.ids = np.append(self.ids, np.full(extra, -1, dtype=np.int64))
        return self.ids

    def id_of(self, reason: Refusal | None) -> int:
        found = self._id.get(reason)
        if found is None:
            found = self._id[reason] = len(self.names)
            self.names.append(reason)
        return found


def _refusal(refused: str) -> Refusal | None:
    """The allocator's refusal as the Filter counts nodes under it (None: it fits): a shortage
    under its counted words ("Insufficient gpu", whatever it was short by), as its code says."""
    if isinstance(refused, Shortage):
        return Refusal(INSUFFICIENT, refused.counted, refused.resource)
    return Refusal(NODE_REJECTED, refused) if refused else None


def _score(
    node: NodeDevices, usage: DeviceUsage, request: DeviceRequest, scoring: Scoring
) -> float:
    found = score_request(node, usage, request, scoring)
    return float(found) if found is not None else 0.0


class CardCheck:
    """One node's cards with a dry run's pods gone, as a preemption keeps victims back: each
    question counts the node's usage with the kept pods' cards taken again. The usage with the
    pods gone and every answer are shared by the drafts of a round that ask about the same node
    in the same state (a search costs several plans over the same nodes)."""

    def __init__(self, fleet: DeviceFleet, idx: int, runs: Runs, released: BoolArray) -> None:
        self.fleet, self.idx = fleet, idx
        self.shape, self.asked, self.shape_id = fleet._shape_of(runs)
        self.held = fleet._holders.get(idx, {})
        self.usage, self.key = fleet._freed(idx, released)  # shared: never changed here
        # kept ids -> their holdings on this node, for every check of the node this round
        self.backs = fleet._backs.setdefault(idx, {})

    def _back(self, kept: Sequence[int]) -> tuple[int, ...]:
        """The holdings of the `kept` pods that hold cards on this node."""
        asked = kept if isinstance(kept, tuple) else tuple(kept)
        back = self.backs.get(asked)
        if back is None:
            holding, held = self.fleet._holding, self.held
            back = self.backs[asked] = tuple(holding[i] for i in asked if i in held)
        return back

    def holds_keeping(self, kept: Sequence[int]) -> bool:
        back = self._back(kept)
        question = (self.key, back, self.shape_id, self.asked)
        answer = self.fleet._answers.get(question)
        if answer is None:
            usage, key = self.fleet._taken_back(self.idx, self.usage, self.key, back)
            fits, _ = self.fleet._usage_count(
                self.idx, usage, key, self.shape, self.shape_id, self.asked
            )
            answer = self.fleet._answers[question] = fits >= self.asked
        return answer

    def keep(self, kept: Sequence[int]) -> None:
        back = self._back(kept)
        self.usage, self.key = self.fleet._taken_back(self.idx, self.usage, self.key, back)
