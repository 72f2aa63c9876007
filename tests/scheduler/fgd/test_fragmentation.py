"""The vectorised fragmentation measure against hand-worked cases and a plain reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.fgd import FragmentationModel
from scheduler.fgd.cluster import MAX_GPUS, PodTable
from tests.scheduler.fgd.builders import TraceBuilder, mixed_trace


def two_shape_model() -> FragmentationModel:
    _, pods = TraceBuilder().node().shared(500, cpu=4_000).whole(2, cpu=10_000).build()
    return FragmentationModel(pods, model_count=1)


def frag_of(model: FragmentationModel, cards: list[int], cpu_free: int = 96_000) -> float:
    free = np.array([cards + [0] * (MAX_GPUS - len(cards))], dtype=np.int64)
    stats = model.stats(free)
    value = model.fragmentation(np.array([0]), np.array([cpu_free]), stats)
    return float(value[0])


def test_hand_worked_states() -> None:
    model = two_shape_model()
    # Both shapes fit; only the 300 left on the third card is unusable for either.
    assert frag_of(model, [1000, 1000, 300]) == 300
    # The two-card shape no longer fits: all 1900 idle is its fragment, 300 for the shared one.
    assert frag_of(model, [1000, 600, 300]) == 0.5 * 300 + 0.5 * 1900
    # Too little CPU for the two-card shape (10 cores), enough for the shared one (4 cores).
    assert frag_of(model, [1000, 1000], cpu_free=5_000) == 0.5 * 0 + 0.5 * 2000


def test_shapes_outside_a_model_see_all_idle_as_fragment() -> None:
    _, pods = TraceBuilder().node(model="G2").node(model="T4").whole(1, spec="T4").whole(1).build()
    model = FragmentationModel(pods, model_count=2)  # models sorted: G2 = 0, T4 = 1
    free = np.array([[1000] * 2 + [0] * 6], dtype=np.int64)
    stats = model.stats(free)
    on_g2 = model.fragmentation(np.array([0]), np.array([96_000]), stats)
    on_t4 = model.fragmentation(np.array([1]), np.array([96_000]), stats)
    assert on_g2[0] == 1000 and on_t4[0] == 0


def reference_frag(pods: PodTable, model_id: int, cpu_free: int, cards: np.ndarray) -> float:
    """The definition, shape by shape, with plain Python."""
    gpu = [i for i in range(len(pods)) if pods.num_gpu[i] > 0]
    idle = int(cards.sum())
    total = 0.0
    for i in gpu:
        need, per_card = int(pods.num_gpu[i]), int(pods.gpu_milli[i])
        allowed = pods.spec_allows[pods.spec_id[i], model_id]
        roomy = sum(1 for c in cards if c >= per_card)
        if not allowed or cpu_free < pods.cpu_milli[i] or roomy < need:
            total += idle
        else:
            total += sum(int(c) for c in cards if c < per_card)
    return total / len(gpu)


card_lists = st.lists(st.integers(0, 1000), min_size=MAX_GPUS, max_size=MAX_GPUS)


@settings(max_examples=60, deadline=None)
@given(cards=card_lists, cpu_free=st.integers(0, 100_000), model_id=st.integers(0, 2))
def test_vectorised_measure_matches_the_definition(
    cards: list[int], cpu_free: int, model_id: int
) -> None:
    _, pods = mixed_trace(pods_per_kind=1)
    model = FragmentationModel(pods, model_count=3)
    free = np.array([cards], dtype=np.int64)
    got = model.fragmentation(np.array([model_id]), np.array([cpu_free]), model.stats(free))[0]
    assert np.isclose(got, reference_frag(pods, model_id, cpu_free, free[0]))


@settings(max_examples=40, deadline=None)
@given(cards=card_lists, request=st.integers(1, 999), whole=st.integers(1, 4))
def test_incremental_states_equal_recounted_states(
    cards: list[int], request: int, whole: int
) -> None:
    _, pods = mixed_trace(pods_per_kind=1)
    model = FragmentationModel(pods, model_count=3)
    free = np.array([cards], dtype=np.int64)
    stats = model.stats(free)
    after, room = model.after_shared(free, stats, request)
    for card in range(MAX_GPUS):
        if not room[0, card]:
            continue
        taken = free.copy()
        taken[0, card] -= request
        fresh = model.stats(taken)
        assert after.idle[0, card] == fresh.idle[0]
        assert np.array_equal(after.cards_at_least[0, card], fresh.cards_at_least[0])
        assert np.array_equal(after.small_idle[0, card], fresh.small_idle[0])
    full = np.flatnonzero(free[0] == 1000)
    if full.size >= whole:
        taken = free.copy()
        taken[0, full[:whole]] = 0
        fresh, moved = model.stats(taken), model.after_whole(stats, whole)
        assert moved.idle[0] == fresh.idle[0]
        assert np.array_equal(moved.cards_at_least[0], fresh.cards_at_least[0])
        assert np.array_equal(moved.small_idle[0], fresh.small_idle[0])
