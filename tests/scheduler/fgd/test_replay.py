"""The replay loop: determinism, no over-allocation, and the allocation-at-load measure."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.fgd import MILLI_PER_GPU, POLICY_NAMES, ReplayResult, replay, tune_workload
from tests.scheduler.fgd.builders import TraceBuilder, mixed_trace


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_same_seed_same_replay(policy: str) -> None:
    cluster, pods = mixed_trace()
    a = replay(cluster, pods, policy, seed=42)
    b = replay(cluster, pods, policy, seed=42)
    assert a.placements == b.placements
    assert np.array_equal(a.allocated_percent, b.allocated_percent)


def test_seeds_change_ties() -> None:
    cluster, pods = mixed_trace()
    runs = {tuple(map(str, replay(cluster, pods, "fgd", seed=s).placements)) for s in range(4)}
    assert len(runs) > 1


def pods_and_nodes(draw: st.DrawFn) -> TraceBuilder:
    b = TraceBuilder()
    for _ in range(draw(st.integers(1, 5))):
        b.node(
            gpus=draw(st.sampled_from([1, 2, 4, 8])),
            model=draw(st.sampled_from(["A", "B"])),
            cpu=draw(st.integers(4, 64)) * 1000,
        )
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.integers(0, 2))
        spec = draw(st.sampled_from(["", "A", "B", "A|B"]))
        if kind == 0:
            b.shared(draw(st.integers(1, 999)), cpu=draw(st.integers(0, 16)) * 1000, spec=spec)
        elif kind == 1:
            b.whole(draw(st.sampled_from([1, 2, 4, 8])), cpu=2_000, spec=spec)
        else:
            b.cpu_only(cpu=draw(st.integers(1, 16)) * 1000)
    b.shared(500)  # at least one GPU pod
    return b


@settings(max_examples=25, deadline=None)
@given(data=st.data(), policy=st.sampled_from(POLICY_NAMES), seed=st.integers(0, 99))
def test_no_card_cpu_or_memory_is_over_allocated(
    data: st.DataObject, policy: str, seed: int
) -> None:
    cluster, pods = data.draw(st.composite(pods_and_nodes)()).build()
    result = replay(cluster, pods, policy, seed)
    tuned = tune_workload(pods, cluster.total_gpu_milli, seed)
    used_cards = np.zeros((cluster.size, 8), dtype=np.int64)
    used_cpu = np.zeros(cluster.size, dtype=np.int64)
    for i, placed in enumerate(result.placements):
        if placed is None:
            continue
        node, cards = placed
        assert len(cards) == tuned.num_gpu[i] and len(set(cards)) == len(cards)
        assert pods.spec_allows[tuned.spec_id[i], cluster.model_id[node]] or not cards
        used_cards[node, list(cards)] += tuned.gpu_milli[i]
        used_cpu[node] += tuned.cpu_milli[i]
    assert (used_cards <= MILLI_PER_GPU).all()
    slots = np.arange(8)[None, :] < cluster.gpu_count[:, None]
    assert (used_cards[~slots] == 0).all()
    assert (used_cpu <= cluster.cpu_milli).all()
    assert result.allocated_percent[-1] == pytest.approx(
        used_cards.sum() / cluster.total_gpu_milli * 100
    )


def result_with(arrived: list[float], allocated: list[float]) -> ReplayResult:
    return ReplayResult(
        "fgd", 0, len(arrived), len(arrived), np.array(arrived), np.array(allocated), []
    )


def test_allocation_at_load_is_the_mean_over_arrivals_rounding_to_it() -> None:
    result = result_with(
        [98.7, 99.6, 100.2, 100.4, 100.6, 129.4], [90.0, 91.0, 93.0, 95.0, 99.0, 97.0]
    )
    assert result.allocation_at(100) == 93.0  # 99.6, 100.2, 100.4 round to 100
    assert result.allocation_at(130) == 97.0  # nothing rounds to 130: falls back to 129 +- 1
    assert result.allocation_at(115) == 99.0  # jumped over: the last arrival below 115%
    assert result.allocation_at(131) is None  # never reached


def test_a_cluster_too_small_for_anything_allocates_nothing() -> None:
    cluster, pods = TraceBuilder().node(gpus=1, cpu=1_000).shared(500, cpu=2_000).build()
    result = replay(cluster, pods, "fgd", 0)
    assert result.placed == 0 and result.allocated_percent.max() == 0
