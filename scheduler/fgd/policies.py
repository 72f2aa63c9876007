"""The replay's policies by name (`make_policy`) and the baseline ones.

Ties between nodes go to the earliest node in a seeded order (see `placement.py`).

- `default`: the engine's default: kube-scheduler LeastAllocated on CPU and memory plus the
  device scorer's LeastAllocated on GPU (two scores, summed); the emptiest card for a shared pod.
- `LeastAllocated`: spread, one score averaging CPU, memory and GPU free after placement.
- `MostAllocated`: binpack (the paper's BestFit family), the fullest card that still fits.
- `Random`: a seeded uniform choice among feasible nodes and fitting cards.
- `fgd` (the default policy): fragmentation gradient descent, see `gradient.py`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.fgd.cluster import MILLI_PER_GPU, BoolArray, ClusterState, IntArray, PodTable
from scheduler.fgd.gradient import FragmentationGradient
from scheduler.fgd.placement import Placement, Policy, best_node, whole_cards

POLICY_NAMES = ("fgd", "default", "LeastAllocated", "MostAllocated", "Random")


class ResourceScore:
    """LeastAllocated / MostAllocated / default: node scores from free fractions after placement."""

    def __init__(self, name: str, rank: IntArray) -> None:
        self.name = name
        self.rank = rank
        self.spread = name != "MostAllocated"

    def place(self, state: ClusterState, pods: PodTable, i: int, feasible: BoolArray) -> Placement:
        nodes = np.flatnonzero(feasible)
        cluster = state.cluster
        cpu = (state.cpu_free[nodes] - pods.cpu_milli[i]) / cluster.cpu_milli[nodes]
        mem = (state.memory_free[nodes] - pods.memory_mib[i]) / cluster.memory_mib[nodes]
        capacity = np.maximum(cluster.gpu_count[nodes], 1) * MILLI_PER_GPU
        gpu = (state.gpu_free[nodes].sum(axis=1) - pods.gpu_request[i]) / capacity
        # default: kube-scheduler's CPU/memory score plus the device scorer's GPU score.
        free = (cpu + mem) / 2 + gpu if self.name == "default" else (cpu + mem + gpu) / 3
        node = best_node(nodes, free if self.spread else -free, self.rank)
        return node, self.cards(state.gpu_free[node], pods, i)

    def cards(self, free: IntArray, pods: PodTable, i: int) -> tuple[int, ...]:
        count, request = int(pods.num_gpu[i]), int(pods.gpu_milli[i])
        if count == 0:
            return ()
        if request >= MILLI_PER_GPU:
            return whole_cards(free, count)
        room = np.where(free >= request, free, -1 if self.spread else MILLI_PER_GPU + 1)
        return (int(np.argmax(room) if self.spread else np.argmin(room)),)


class RandomFit:
    """A seeded uniform choice of node, and of card for a shared pod."""

    name = "Random"

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def place(self, state: ClusterState, pods: PodTable, i: int, feasible: BoolArray) -> Placement:
        node = int(self.rng.choice(np.flatnonzero(feasible)))
        count, request = int(pods.num_gpu[i]), int(pods.gpu_milli[i])
        if count == 0:
            return node, ()
        free = state.gpu_free[node]
        if request >= MILLI_PER_GPU:
            return node, whole_cards(free, count)
        return node, (int(self.rng.choice(np.flatnonzero(free >= request))),)


def make_policy(name: str, state: ClusterState, workload: PodTable, seed: int) -> Policy:
    """The named policy for one replay; `workload` is the trace whose shapes FGD expects."""
    rank: npt.NDArray[np.int64] = (
        np.random.default_rng(seed + 7_919).permutation(state.cluster.size).astype(np.int64)
    )
    if name == "fgd":
        return FragmentationGradient(state, workload, rank)
    if name in ("default", "LeastAllocated", "MostAllocated"):
        return ResourceScore(name, rank)
    if name == "Random":
        return RandomFit(seed)
    raise ValueError(f"unknown policy {name!r} (choose from {', '.join(POLICY_NAMES)})")
