"""Tuning the arrival sequence to the protocol's target GPU load."""

from __future__ import annotations

import numpy as np

from scheduler.fgd import tune_workload
from tests.scheduler.fgd.builders import mixed_trace


def test_top_up_crosses_the_target_with_the_last_pod_only() -> None:
    cluster, pods = mixed_trace(pods_per_kind=2)
    assert pods.gpu_request.sum() < cluster.total_gpu_milli
    tuned = tune_workload(pods, cluster.total_gpu_milli, seed=42, ratio=1.3)
    cum = np.cumsum(tuned.gpu_request)
    target = 1.3 * cluster.total_gpu_milli
    assert cum[-1] >= target and cum[-1] - tuned.gpu_request[-1] < target
    assert len(tuned) > len(pods)
    assert set(tuned.names) <= set(pods.names)


def test_an_oversized_trace_is_cut_at_the_target() -> None:
    cluster, pods = mixed_trace(pods_per_kind=40)
    assert pods.gpu_request.sum() > 0.5 * cluster.total_gpu_milli
    tuned = tune_workload(pods, cluster.total_gpu_milli, seed=1, ratio=0.5)
    assert len(tuned) < len(pods)
    assert len(set(tuned.names)) == len(tuned)  # a cut never repeats a pod


def test_same_seed_same_sequence_other_seed_other_sequence() -> None:
    cluster, pods = mixed_trace()
    a = tune_workload(pods, cluster.total_gpu_milli, seed=7)
    b = tune_workload(pods, cluster.total_gpu_milli, seed=7)
    c = tune_workload(pods, cluster.total_gpu_milli, seed=8)
    assert a.names == b.names
    assert a.names != c.names
