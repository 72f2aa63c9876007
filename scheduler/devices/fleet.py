"""Many nodes' devices at once: usage per node, grouped so equal nodes are evaluated once.

A round asks "how many of these pods fit each node's cards" for thousands of nodes and every job.
Nodes with the same device layout and the same usage give the same answer, so `DeviceFleet` keeps
every device node in a group keyed by (layout, usage fingerprint), computes a count or a score
once per group and spreads it over the nodes with numpy. Only the nodes a placement touches move
to another group. The allocation itself is always the real allocator's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.devices.allocator import (
    DeviceAllocation,
    allocate,
    count_fits,
    explain,
    score_request,
)
from scheduler.devices.model import AllocatedDevice, DeviceUsage, NodeDevices
from scheduler.devices.names import Scoring
from scheduler.devices.request import DeviceRequest

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Held = tuple[AllocatedDevice, ...]
Runs = tuple[tuple[DeviceRequest, int], ...]
"""Consecutive pods sharing a device request: (request, how many), in placement order."""


class DeviceFleet:
    """Device nodes of one round, by node index; the only mutable part is their usage."""

    def __init__(
        self,
        node_count: int,
        nodes: Mapping[int, NodeDevices],
        usage: Mapping[int, DeviceUsage],
        scoring: Scoring = "LeastAllocated",
    ) -> None:
        self.nodes = dict(nodes)
        self.usage = {idx: usage.get(idx) or DeviceUsage(node) for idx, node in nodes.items()}
        self.scoring = scoring
        self.device_nodes: IntArray = np.array(sorted(nodes), dtype=np.int64)
        self.group: IntArray = np.full(node_count, -1, dtype=np.int64)
        self._layouts: dict[tuple[Any, ...], int] = {}
        self._layout_of = {idx: self._layout_id(node) for idx, node in self.nodes.items()}
        self._groups: dict[tuple[Any, ...], int] = {}
        self._members: list[tuple[NodeDevices, DeviceUsage]] = []
        self._counts: dict[tuple[Any, ...], int] = {}
        self._released_counts: dict[tuple[Any, ...], int] = {}
        self._scores: dict[tuple[Any, ...], float] = {}
        self._plans: dict[tuple[Any, ...], DeviceAllocation | None] = {}
        for idx in self.nodes:
            self._regroup(idx)

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

    # --- questions over many nodes --------------------------------------------------------------
    def slots(
        self,
        node_indices: IntArray,
        runs: Runs,
        released: Mapping[int, Iterable[Held]] | None = None,
        tags: Mapping[int, tuple[str, ...]] | None = None,
    ) -> IntArray:
        """Per position, how many pods of `runs` fit that node's devices in order (0: none).

        `tags` names what `released` frees on a node (e.g. the pod keys): equal tags on nodes of
        one group mean equal answers, and strings hash far faster than device dataclasses."""
        groups = self.group[node_indices]
        table = np.zeros(len(self._members) + 1, dtype=np.int64)  # last slot: non-device nodes
        for g in self._present(groups):
            key = (int(g), runs)
            fits = self._counts.get(key)
            if fits is None:
                node, usage = self._members[int(g)]
                fits = self._fit_runs(node, usage, runs)
                self._counts[key] = fits
            table[g] = fits
        result: IntArray = table[groups]
        for pos in self._positions(node_indices, released):
            idx = int(node_indices[pos])
            freed = tags[idx] if tags is not None else tuple((released or {})[idx])
            shortcut = (int(self.group[idx]), freed, runs)
            known = self._released_counts.get(shortcut)
            if known is not None:
                result[pos] = known
                continue
            usage = self.usage[idx].copy()
            for held in (released or {})[idx]:
                usage.release(held)
            # A preemption dry run frees many nodes into the same few states (often: idle);
            # equal layout and usage give equal counts, so each state is counted once a round.
            state = (self._key(idx, usage), runs)
            fits = self._released_counts.get(state)
            if fits is None:
                fits = self._fit_runs(self.nodes[idx], usage, runs)
                self._released_counts[state] = fits
            # Same group and same cards freed: the same state, without releasing again.
            self._released_counts[shortcut] = fits
            result[pos] = fits
        return result

    def scores(self, node_indices: IntArray, request: DeviceRequest) -> FloatArray:
        """Per position, the node score for one pod of `request` (0 where it does not fit)."""
        groups = self.group[node_indices]
        table = np.zeros(len(self._members) + 1, dtype=np.float64)
        for g in self._present(groups):
            key = (int(g), request)
            score = self._scores.get(key)
            if score is None:
                node, usage = self._members[int(g)]
                found = score_request(node, usage, request, self.scoring)
                score = float(found) if found is not None else 0.0
                self._scores[key] = score
            table[g] = score
        result: FloatArray = table[groups]
        return result

    def reasons(self, node_indices: IntArray, request: DeviceRequest) -> dict[str, int]:
        """Why one pod of `request` does not fit, counted over the device nodes given."""
        groups = self.group[node_indices]
        counts = np.bincount(groups[groups >= 0], minlength=len(self._members))
        reasons: dict[str, int] = {}
        for g in np.flatnonzero(counts).tolist():
            count = int(counts[g])
            node, usage = self._members[g]
            why = explain(node, usage, request)
            # "Insufficient gpu: 4 needed, ..." -> "Insufficient gpu", so nodes group by reason.
            reason = why.split(":")[0]
            if reason:
                reasons[reason] = reasons.get(reason, 0) + count
        return reasons

    # --- internals ------------------------------------------------------------------------------
    def _present(self, groups: IntArray) -> list[int]:
        """The distinct groups among `groups` (-1: no devices); counting beats np.unique here."""
        counts = np.bincount(groups[groups >= 0], minlength=len(self._members))
        present: list[int] = np.flatnonzero(counts).tolist()
        return present

    def _fit_runs(self, node: NodeDevices, usage: DeviceUsage, runs: Runs) -> int:
        if len(runs) == 1:
            request, count = runs[0]
            return count_fits(node, usage, request, count, self.scoring)
        trial = usage.copy()
        total = 0
        for request, count in runs:
            for _ in range(count):
                allocation = allocate(node, trial, request, self.scoring)
                if allocation is None:
                    break
                trial.apply(allocation.devices)
                total += 1
        return total

    def _positions(
        self, node_indices: IntArray, released: Mapping[int, Iterable[Held]] | None
    ) -> Sequence[int]:
        if not released:
            return []
        wanted = np.array(sorted(released), dtype=np.int64)
        return [int(p) for p in np.flatnonzero(np.isin(node_indices, wanted))]

    def _layout_id(self, node: NodeDevices) -> int:
        # Flat tuples hash far faster than nested frozen dataclasses, at 5,000 nodes it shows.
        devices = tuple(
            (
                d.type,
                d.minor,
                d.health,
                d.core,
                d.memory,
                d.memory_ratio,
                d.rdma,
                d.topology.numa_node,
                d.topology.pcie_id,
                tuple(vf.minor for vf in d.vfs),
            )
            for d in (*node.gpus, *node.rdmas)
        )
        partitions = id(node.partitions) if node.partitions else None
        key = (devices, node.vendor, node.model, partitions, node.partition_policy, node.ascend)
        return self._layouts.setdefault(key, len(self._layouts))

    def _key(self, idx: int, usage: DeviceUsage) -> tuple[Any, ...]:
        """A node's group key: its layout and a fingerprint of its usage."""
        return (
            self._layout_of[idx],
            tuple(usage.core),
            tuple(usage.memory),
            tuple(usage.ratio),
            tuple(usage.npu_core),
            tuple(usage.npu_cpu),
            tuple(usage.dvpp),
            tuple(usage.rdma),
            tuple(frozenset(v) for v in usage.vfs),
        )

    def _regroup(self, idx: int) -> None:
        usage = self.usage[idx]
        key = self._key(idx, usage)
        group = self._groups.get(key)
        if group is None:
            group = len(self._members)
            self._groups[key] = group
            # A frozen copy: the member node's usage keeps changing, the group's must not.
            self._members.append((self.nodes[idx], usage.copy()))
        self.group[idx] = group
