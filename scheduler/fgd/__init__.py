"""GPU-sharing trace replay with the FGD (ATC'23) protocol and a fragmentation-aware policy.

Pure numpy, no I/O: callers parse CSV rows with `parse_nodes` / `parse_pods`, then `replay` a
trace under a policy for a seed. See `docs/benchmarks.md` ("GPU-sharing trace replay").
"""

from scheduler.fgd.cluster import (
    MAX_GPUS,
    MILLI_PER_GPU,
    Cluster,
    ClusterState,
    PodTable,
    TraceError,
    parse_nodes,
    parse_pods,
)
from scheduler.fgd.fragmentation import FragmentationModel
from scheduler.fgd.policies import POLICY_NAMES, make_policy
from scheduler.fgd.replay import REPORTED_LOADS, ReplayResult, replay
from scheduler.fgd.workload import DEFAULT_TUNE_RATIO, tune_workload

__all__ = [
    "DEFAULT_TUNE_RATIO",
    "MAX_GPUS",
    "MILLI_PER_GPU",
    "POLICY_NAMES",
    "REPORTED_LOADS",
    "Cluster",
    "ClusterState",
    "FragmentationModel",
    "PodTable",
    "ReplayResult",
    "TraceError",
    "make_policy",
    "parse_nodes",
    "parse_pods",
    "replay",
    "tune_workload",
]
