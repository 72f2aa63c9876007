"""Parsing openb rows and the live free-resource state."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.fgd import ClusterState, TraceError, parse_nodes, parse_pods
from tests.scheduler.fgd.builders import TraceBuilder


def test_nodes_pad_absent_cards_with_zero_free() -> None:
    cluster, _ = TraceBuilder().node(gpus=2, model="T4").node(gpus=8).cpu_only().build()
    state = ClusterState(cluster)
    assert cluster.models == ("G2", "T4")
    assert state.gpu_free[0].tolist() == [1000, 1000, 0, 0, 0, 0, 0, 0]
    assert cluster.total_gpu_milli == 10_000


def test_gpu_spec_becomes_a_model_mask_and_is_ignored_for_cpu_pods() -> None:
    cluster, pods = (
        TraceBuilder()
        .node(model="T4")
        .node(model="V100M32")
        .node(model="G2")
        .whole(1, spec="V100M16|V100M32")
        .whole(1)
        .pod(0, 0, spec="T4")
        .build()
    )
    allowed = pods.spec_allows[pods.spec_id]
    assert allowed[0].tolist() == [m == "V100M32" for m in cluster.models]
    assert allowed[1].all() and allowed[2].all()


def test_multigpu_rows_without_spec_column_parse() -> None:
    cluster = parse_nodes(
        [{"sn": "n", "cpu_milli": "8000", "memory_mib": "1", "gpu": "1", "model": "P100"}]
    )
    pods = parse_pods(
        [{"name": "p", "cpu_milli": "1", "memory_mib": "1", "num_gpu": "1", "gpu_milli": "1000"}],
        cluster.models,
    )
    assert pods.spec_id.tolist() == [0]


@pytest.mark.parametrize(
    "row",
    [
        {"num_gpu": "2", "gpu_milli": "500"},  # shared multi-GPU is not in openb
        {"num_gpu": "1", "gpu_milli": "0"},
        {"num_gpu": "9", "gpu_milli": "1000"},
        {"num_gpu": "x", "gpu_milli": "1000"},
    ],
)
def test_impossible_pod_rows_are_rejected(row: dict[str, str]) -> None:
    with pytest.raises(TraceError):
        parse_pods([{"name": "p", "cpu_milli": "1", "memory_mib": "1", **row}], ("G2",))


def test_feasible_checks_cpu_memory_model_and_cards() -> None:
    cluster, pods = (
        TraceBuilder()
        .node(gpus=2, model="T4", cpu=10_000)
        .node(gpus=8, model="G2")
        .node(gpus=8, model="G2", memory=1_000)
        .whole(4)
        .shared(500, cpu=20_000)
        .shared(500, spec="T4")
        .build()
    )
    state = ClusterState(cluster)
    assert state.feasible(pods, 0).tolist() == [False, True, False]
    assert state.feasible(pods, 1).tolist() == [False, True, False]
    assert state.feasible(pods, 2).tolist() == [True, False, False]


def test_bind_takes_resources_and_refuses_over_allocation() -> None:
    cluster, pods = TraceBuilder().node(gpus=1, cpu=8_000).shared(600).shared(600).build()
    state = ClusterState(cluster)
    state.bind(pods, 0, 0, (0,))
    assert state.gpu_free[0, 0] == 400 and state.cpu_free[0] == 4_000
    assert state.used_gpu_milli == 600 and state.version[0] == 1
    with pytest.raises(ValueError, match="too little room"):
        state.bind(pods, 1, 0, (0,))
    assert state.gpu_free[0, 0] == 400  # a refused bind changes nothing
    assert np.array_equal(state.version, [1])
