"""The replay loop and its measure: GPU allocation ratio against arrived GPU workload.

Arrival only (no pod ever leaves) and each pod is tried once: if no node can host it, it fails and
is not retried. After every arrival the loop records the arrived GPU requests and the allocated GPU
milli, both as percent of the cluster's GPU capacity. The paper's figure "allocation at k% arrived"
is the mean allocation over the arrivals whose arrived percent rounds to k (falling back to k +- 1
when no arrival rounds to k), which is how its expected-results CSV was computed. A coarse trace
that jumps over that window gets the allocation after the last arrival below k; a load never
reached gives None.

The loop takes no clock: callers time it (the management command reports pods per second).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scheduler.fgd.cluster import Cluster, ClusterState, PodTable
from scheduler.fgd.fragmentation import FloatArray
from scheduler.fgd.policies import make_policy
from scheduler.fgd.workload import DEFAULT_TUNE_RATIO, tune_workload

REPORTED_LOADS = (100, 130)


@dataclass(frozen=True)
class ReplayResult:
    """One seed of one policy on one trace."""

    policy: str
    seed: int
    pods: int
    placed: int
    arrived_percent: FloatArray  # after each arrival
    allocated_percent: FloatArray
    placements: list[tuple[int, tuple[int, ...]] | None] = field(repr=False)

    def allocation_at(self, load_percent: int) -> float | None:
        """Mean GPU allocation percent over arrivals whose arrived load rounds to `load_percent`."""
        rounded = np.round(self.arrived_percent)
        for window in (0, 1):
            near = np.abs(rounded - load_percent) <= window
            if near.any():
                return round(float(self.allocated_percent[near].mean()), 2)
        # Coarse traces (few, large pods) can jump over the window: take the last arrival before.
        before = np.flatnonzero(self.arrived_percent <= load_percent)
        if before.size and self.arrived_percent[-1] >= load_percent:
            return round(float(self.allocated_percent[before[-1]]), 2)
        return None


def replay(
    cluster: Cluster,
    trace: PodTable,
    policy_name: str,
    seed: int,
    tune_ratio: float = DEFAULT_TUNE_RATIO,
    on_pod: Callable[[int], None] | None = None,
) -> ReplayResult:
    """Replay `trace` tuned with `seed` on an empty `cluster` under the named policy."""
    pods = tune_workload(trace, cluster.total_gpu_milli, seed, tune_ratio)
    state = ClusterState(cluster)
    policy = make_policy(policy_name, state, trace, seed)
    total = cluster.total_gpu_milli
    requests = pods.gpu_request
    arrived: FloatArray = np.cumsum(requests).astype(np.float64) * (100.0 / total)
    allocated = np.zeros(len(pods))
    placements: list[tuple[int, tuple[int, ...]] | None] = []
    for i in range(len(pods)):
        feasible = state.feasible(pods, i)
        if feasible.any():
            node, cards = policy.place(state, pods, i, feasible)
            state.bind(pods, i, node, cards)
            placements.append((node, cards))
        else:
            placements.append(None)
        allocated[i] = state.used_gpu_milli * (100.0 / total)
        if on_pod is not None:
            on_pod(i)
    return ReplayResult(
        policy=policy_name,
        seed=seed,
        pods=len(pods),
        placed=sum(p is not None for p in placements),
        arrived_percent=arrived,
        allocated_percent=allocated,
        placements=placements,
    )
