"""MaxPodsPerBlock: a Filter plugin (slot-limit flavour). Extension point: Filter.

A block (the nodes sharing the label `blockLabel`, the network topology's block by default) holds
at most `maxPods` pods: those bound there and those placed earlier this round count. A block's
room left is handed to its nodes, those that fit most of the job's first pod first, so the offer
slots summed over a block never exceed its room; nodes without the label are not limited.

Bound pods count even while a preemption dry run treats them as gone, so this plugin's counts
never depend on a dry run and it has no node checks to give (`node_checks` -> {}): preempting
does not make room in a full block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from scheduler.framework import Arg, Handle, IntArray, NodeCheck
from scheduler.model import JobInfo, PodInfo
from scheduler.state import CycleState

BLOCK = "network.topology.nvidia.com/block"
FULL = "block is full (MaxPodsPerBlock)"


class MaxPodsPerBlock:
    name = "MaxPodsPerBlock"
    extension_points = frozenset({"Filter"})
    arguments: ClassVar[Mapping[str, Arg]] = {
        "maxPods": Arg("int", minimum=0),
        "blockLabel": Arg("string"),
    }

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        self.max_pods = int(args.get("maxPods", 16))
        self.label = str(args.get("blockLabel", BLOCK))

    def slot_limits(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> IntArray | None:
        block = self._blocks(state)
        if not pods or (block < 0).all():
            return None  # no node is in a block: nothing to limit
        room = self._room(state, block)
        fit = _first_pod_fit(state, pods[0], len(pods))
        inside = np.flatnonzero(block >= 0)
        # per block, the nodes that fit most first; each takes what is left of the block's room
        order = inside[np.lexsort((inside, -fit[inside], block[inside]))]
        ordered_fit = fit[order]
        total = np.cumsum(ordered_fit)
        starts = np.flatnonzero(np.r_[True, block[order][1:] != block[order][:-1]])
        lengths = np.diff(np.r_[starts, len(order)])
        before = total - ordered_fit - np.repeat(total[starts] - ordered_fit[starts], lengths)
        given = np.clip(room[block[order]] - before, 0, ordered_fit)
        limit = np.full(len(state.nodes), len(pods), dtype=np.int64)
        limit[order] = given
        result: IntArray = limit[node_indices]
        return result

    def node_checks(
        self, state: CycleState, on_node: Mapping[int, Sequence[PodInfo]]
    ) -> Mapping[int, NodeCheck]:
        return {}  # releasing bound pods never changes this plugin's counts (module docstring)

    def explain(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> dict[str, int]:
        block = self._blocks(state)
        if (block < 0).all():
            return {}
        room = self._room(state, block)
        asked = block[node_indices]
        full = int(np.count_nonzero((asked >= 0) & (room[np.maximum(asked, 0)] <= 0)))
        return {FULL: full} if full else {}

    def _blocks(self, state: CycleState) -> IntArray:
        """Per node, its block's number (-1: not in a block); once a round."""
        key = f"{self.name}/blocks"
        blocks: IntArray | None = state.plugin_data.get(key)
        if blocks is None:
            names = sorted({n.labels[self.label] for n in state.nodes if self.label in n.labels})
            number = {name: i for i, name in enumerate(names)}
            blocks = np.array(
                [number.get(n.labels.get(self.label, ""), -1) for n in state.nodes],
                dtype=np.int64,
            )
            state.plugin_data[key] = blocks
        return blocks

    def _room(self, state: CycleState, block: IntArray) -> IntArray:
        """Per block, how many more pods it may hold: bound pods and pods placed this round
        count."""
        held = [len(pods) for _, pods in sorted(state.bound_on_node.items())]
        nodes = [idx for idx, _ in sorted(state.bound_on_node.items())]
        per_node = np.zeros(len(state.nodes), dtype=np.int64)
        per_node[nodes] = held
        np.add.at(per_node, np.array(list(state.assumed.values()), dtype=np.int64), 1)
        blocks = int(block.max()) + 1
        inside = block >= 0
        used = np.bincount(block[inside], weights=per_node[inside], minlength=blocks)
        room: IntArray = np.maximum(self.max_pods - used.astype(np.int64), 0)
        return room


def _first_pod_fit(state: CycleState, pod: PodInfo, most: int) -> IntArray:
    """Per node, how many pods like `pod` its free resources hold (at most `most`)."""
    need = state.vector(pod)
    free = state.free()
    fit = np.full(len(state.nodes), most, dtype=np.int64)
    for column in np.flatnonzero(need > 0):
        np.minimum(fit, free[:, column] // need[column], out=fit)
    result: IntArray = np.maximum(fit, 0)
    return result
