"""What every replay policy shares: the `Policy` contract and the tie-breaking helpers.

A policy sees the live `ClusterState`, the pod, and the nodes that can host it; it returns the node
and the cards. Ties between nodes go to the earliest node in a seeded order (`rank`), so one seed
gives one result and different seeds sample different tie-breaks, as kube-scheduler's random choice
among equal scores does.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from scheduler.fgd.cluster import MILLI_PER_GPU, BoolArray, ClusterState, IntArray, PodTable
from scheduler.fgd.fragmentation import FloatArray

Placement = tuple[int, tuple[int, ...]]


class Policy(Protocol):
    name: str

    def place(self, state: ClusterState, pods: PodTable, i: int, feasible: BoolArray) -> Placement:
        """Node and cards for pod i; `feasible` has at least one True."""
        ...


def best_node(candidates: IntArray, scores: FloatArray, rank: IntArray) -> int:
    """The candidate with the highest score, ties to the lowest rank."""
    top = scores.max()
    tied = candidates[scores == top]
    return int(tied[np.argmin(rank[tied])])


def whole_cards(free: IntArray, count: int) -> tuple[int, ...]:
    """The first `count` entirely free cards: they are interchangeable for every policy."""
    return tuple(int(c) for c in np.flatnonzero(free >= MILLI_PER_GPU)[:count])
