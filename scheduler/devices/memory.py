"""What the device fleet has counted, kept in arrays within a round and by content across rounds.

Within a round (`DeviceFleet`): per pod shape, a count per group of equal nodes (`GroupCounts`) and
per request a score per group (`GroupScores`), read for thousands of nodes by array indexing; and
per node the last counts with a preemption dry run's pods gone (`Memo`).

Across rounds (`FleetMemory`): a node's count for a pod shape depends only on its device layout,
its usage and the scoring strategy, so the answers are kept under exactly that key: the layout's
content (cards, NICs, vendor, model, partition table, policy, vNPU profile) and the usage
fingerprint, which changes whenever a pod takes or gives back a card. A caller that keeps a warm
snapshot between rounds keeps one `FleetMemory` with it (`ClusterSnapshot.engine_cache`); a node
whose devices did not change is then never counted again, and one whose usage moved simply asks
under its new key. Nothing in it can change a result: a recalled answer is the one counting would
give.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.devices.model import NodeDevices
from scheduler.devices.request import DeviceRequest

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
UIntArray = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]
Runs = tuple[tuple[DeviceRequest, int], ...]
"""Consecutive pods sharing a device request: (request, how many), in placement order."""

SATURATE = 16
"""A one-request shape is counted to at least this many pods, so jobs of every size share it."""


def shape_key(runs: Runs) -> tuple[Runs, int]:
    """The cache key of `runs` and the pods asked. One request is keyed by itself alone (count 0)
    and counted past the job's size; a mix of requests is keyed exactly."""
    asked = sum(count for _, count in runs)
    if len(runs) == 1:
        return ((runs[0][0], 0),), asked
    return runs, asked


def answers(counted: tuple[int, int], asked: int) -> bool:
    """Whether (fits, limit) answers a job of `asked` pods: the node filled up before the limit,
    or at least `asked` pods fit."""
    fits, limit = counted
    return fits < limit or asked <= fits


class Memo:
    """For one pod shape: per node, the last two (group, released bits) counted, with their
    (fits, limit). Two ways, because a preemption search asks alternately with every candidate
    victim gone and with one plan's victims gone; a miss replaces the way not used last."""

    WAYS = 2

    def __init__(self, node_count: int) -> None:
        self.group: IntArray = np.full((self.WAYS, node_count), -2, dtype=np.int64)
        self.bits: UIntArray = np.zeros((self.WAYS, node_count), dtype=np.uint64)
        self.fits: IntArray = np.zeros((self.WAYS, node_count), dtype=np.int64)
        self.limit: IntArray = np.zeros((self.WAYS, node_count), dtype=np.int64)
        self.last: IntArray = np.zeros(node_count, dtype=np.int64)

    def recall(
        self, nodes: IntArray, groups: IntArray, bits: UIntArray, asked: int
    ) -> tuple[IntArray, BoolArray]:
        """Per node, the remembered fits for (group, bits) and whether they answer `asked`."""
        fits: IntArray = np.zeros(len(nodes), dtype=np.int64)
        known: BoolArray = np.zeros(len(nodes), dtype=np.bool_)
        for way in range(self.WAYS):
            stored = self.fits[way, nodes]
            hit = (self.group[way, nodes] == groups) & (self.bits[way, nodes] == bits)
            hit &= (stored < self.limit[way, nodes]) | (stored >= asked)
            fits[hit] = stored[hit]
            known |= hit
            self.last[nodes[hit]] = way
        return fits, known

    def remember_all(
        self, nodes: IntArray, groups: IntArray, bits: UIntArray, fits: IntArray, limits: IntArray
    ) -> None:
        """Per node (each once), (fits, limit) counted for (group, bits), in the way not used
        last."""
        ways = (self.last[nodes] + 1) % self.WAYS
        self.group[ways, nodes], self.bits[ways, nodes] = groups, bits
        self.fits[ways, nodes], self.limit[ways, nodes] = fits, limits
        self.last[nodes] = ways


class GroupCounts:
    """For one pod shape: per group, the (fits, limit) counted (fits -1: not yet); grows with
    the groups, so a question over thousands of nodes is a few array operations."""

    def __init__(self) -> None:
        self.fits: IntArray = np.full(0, -1, dtype=np.int64)
        self.limit: IntArray = np.zeros(0, dtype=np.int64)

    def grown(self, groups: int) -> tuple[IntArray, IntArray]:
        if len(self.fits) < groups:
            extra = max(groups - len(self.fits), len(self.fits))
            self.fits = np.append(self.fits, np.full(extra, -1, dtype=np.int64))
            self.limit = np.append(self.limit, np.zeros(extra, dtype=np.int64))
        return self.fits, self.limit


class GroupScores:
    """For one device request: per group, the node score (NaN: not yet)."""

    def __init__(self) -> None:
        self.scores: FloatArray = np.full(0, np.nan, dtype=np.float64)

    def grown(self, groups: int) -> FloatArray:
        if len(self.scores) < groups:
            extra = max(groups - len(self.scores), len(self.scores))
            self.scores = np.append(self.scores, np.full(extra, np.nan, dtype=np.float64))
        return self.scores


class FleetMemory:
    """Counts and scores by (layout content, usage fingerprint, shape or request, scoring), for
    as many rounds as the caller keeps it; emptied when it reaches `limit` entries, so a
    long-lived worker's memory stays bounded."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._layouts: dict[tuple[Any, ...], int] = {}
        self._counts: dict[tuple[Hashable, ...], tuple[int, int]] = {}
        self._scores: dict[tuple[Hashable, ...], float] = {}
        self.counted = 0  # counts computed rather than recalled (what a warm round saves)

    def layout_id(self, node: NodeDevices) -> int:
        """A number for the node's device layout, equal for equal content in every round."""
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
        partitions = tuple(sorted(node.partitions.items())) if node.partitions else None
        key = (
            devices,
            node.vendor,
            node.model,
            partitions,
            node.partition_policy,
            node.ascend,
            node.isolation_provider,
        )
        return self._layouts.setdefault(key, len(self._layouts))

    def count(
        self,
        state: tuple[Any, ...],
        shape: Runs,
        scoring: str,
        asked: int,
        counting: Callable[[], tuple[int, int]],
    ) -> tuple[int, int]:
        """(fits, limit) of `shape` on a node in `state` (its layout id and usage fingerprint),
        recalled when a count answers `asked`, else counted by `counting` and kept."""
        key = (state, shape, scoring)
        found = self._counts.get(key)
        if found is None or not answers(found, asked):
            found = counting()
            self.counted += 1
            if len(self._counts) >= self.limit:
                self._counts.clear()
            self._counts[key] = found
        return found

    def score(
        self,
        state: tuple[Any, ...],
        request: DeviceRequest,
        scoring: str,
        scoring_node: Callable[[], float],
    ) -> float:
        """The node score of one pod of `request` on a node in `state`."""
        key = (state, request, scoring)
        found = self._scores.get(key)
        if found is None:
            found = scoring_node()
            if len(self._scores) >= self.limit:
                self._scores.clear()
            self._scores[key] = found
        return found
