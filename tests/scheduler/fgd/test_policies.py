"""Each policy's choice on scenarios where the right answer is known, and FGD's cache."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.fgd import ClusterState, make_policy
from scheduler.fgd.gradient import FragmentationGradient, model_pressure
from tests.scheduler.fgd.builders import TraceBuilder


def half_used_scenario() -> TraceBuilder:
    """Node 0 has a card with 530 free (470 taken), node 1 is fresh; shapes 470, 650, 810."""
    b = TraceBuilder().node(gpus=2).node(gpus=2)
    b.shared(470).shared(470).shared(650).shared(810)
    return b


def prepared(name: str, seed: int = 0) -> tuple[ClusterState, object, object]:
    cluster, pods = half_used_scenario().build()
    state = ClusterState(cluster)
    state.bind(pods, 0, 0, (0,))
    return state, pods, make_policy(name, state, pods, seed)


def test_fgd_completes_the_partial_card_instead_of_breaking_a_whole_one() -> None:
    state, pods, policy = prepared("fgd")
    assert policy.place(state, pods, 1, state.feasible(pods, 1)) == (0, (0,))  # type: ignore[attr-defined]


def test_most_allocated_packs_onto_the_tightest_card() -> None:
    state, pods, policy = prepared("MostAllocated")
    assert policy.place(state, pods, 1, state.feasible(pods, 1)) == (0, (0,))  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["LeastAllocated", "default"])
def test_spreading_policies_take_the_empty_node(name: str) -> None:
    state, pods, policy = prepared(name)
    node, cards = policy.place(state, pods, 1, state.feasible(pods, 1))  # type: ignore[attr-defined]
    assert node == 1 and cards in ((0,), (1,))


def test_random_is_seeded() -> None:
    picks = []
    for _ in range(2):
        state, pods, policy = prepared("Random", seed=3)
        picks.append([policy.place(state, pods, 1, state.feasible(pods, 1)) for _ in range(5)])  # type: ignore[attr-defined]
    assert picks[0] == picks[1]


def test_fgd_keeps_unconstrained_pods_off_a_scarce_model() -> None:
    b = TraceBuilder().node(gpus=8, model="G2").node(gpus=2, model="T4")
    for _ in range(6):
        b.whole(1, spec="T4")
    b.whole(1)
    cluster, pods = b.build()
    pressure = model_pressure(pods, cluster)
    assert pressure[cluster.models.index("T4")] > pressure[cluster.models.index("G2")]
    state = ClusterState(cluster)
    policy = make_policy("fgd", state, pods, 0)
    unconstrained = len(pods) - 1
    node, _ = policy.place(state, pods, unconstrained, state.feasible(pods, unconstrained))
    assert cluster.models[cluster.model_id[node]] == "G2"


def test_unknown_policy_is_an_error() -> None:
    cluster, pods = half_used_scenario().build()
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("BestFitPlus", ClusterState(cluster), pods, 0)


def test_fgd_cached_rises_equal_fresh_ones_after_binds() -> None:
    b = TraceBuilder()
    for k in range(6):
        b.node(gpus=8 if k % 2 else 2, model="G2" if k % 2 else "T4")
    for milli in (470, 230, 810, 650, 470, 320):
        b.shared(milli)
    b.whole(2).whole(1).cpu_only()
    cluster, pods = b.build()
    state = ClusterState(cluster)
    policy = make_policy("fgd", state, pods, 5)
    assert isinstance(policy, FragmentationGradient)
    everyone = np.arange(cluster.size)
    for i in range(len(pods)):
        feasible = state.feasible(pods, i)
        node, cards = policy.place(state, pods, i, feasible)
        state.bind(pods, i, node, cards)
        fresh = make_policy("fgd", state, pods, 5)
        assert isinstance(fresh, FragmentationGradient)
        for j in range(len(pods)):
            policy._refresh_nodes(state)
            cached, _ = policy._cached_rise(state, pods, j)
            recomputed, _ = fresh.rise(state, pods, j, everyone)
            assert np.allclose(cached, recomputed)
