"""The device fleet's memory across rounds: a warm round decides exactly as a cold one, and
counts only the node states it has not seen before."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from benchmarks.round_scale import build_snapshot
from scheduler.devices import build_node_devices
from scheduler.devices.memory import FleetMemory, Memo
from scheduler.model import ClusterSnapshot
from scheduler.result import RoundResult
from scheduler.round import plan_round


def bound_after(snapshot: ClusterSnapshot, result: RoundResult) -> ClusterSnapshot:
    """The next round's snapshot: the pods placed are running where they were placed, holding
    the cards their device-allocated annotation names."""
    pods = []
    for pod in snapshot.pods:
        placed = result.placements.get(pod.key)
        if placed is not None:
            annotations = {**pod.annotations, **placed.annotations}
            pod = replace(pod, node=placed.node, phase="Running", annotations=annotations)
        pods.append(pod)
    return replace(snapshot, pods=tuple(pods))


def test_a_warm_round_decides_as_a_cold_one_and_counts_only_new_states() -> None:
    first = build_snapshot(96, 600, 60)
    cache: dict[str, object] = {}
    warm_first = plan_round(replace(first, engine_cache=cache))
    assert warm_first.to_dict() == plan_round(first).to_dict()
    memory = cache["DeviceShare"]
    assert isinstance(memory, FleetMemory)
    counted_first = memory.counted
    assert counted_first > 0 and warm_first.placements

    # The same cluster again: every count is recalled.
    again = plan_round(replace(first, engine_cache=cache))
    assert again.to_dict() == warm_first.to_dict()
    assert memory.counted == counted_first

    # The placed pods now hold their cards: usage moved, so those nodes ask under new keys,
    # and the decisions still equal a cold round's on the same snapshot.
    second = bound_after(first, warm_first)
    cold_cache: dict[str, object] = {}
    cold = plan_round(replace(second, engine_cache=cold_cache))
    warm = plan_round(replace(second, engine_cache=cache))
    assert warm.to_dict() == cold.to_dict()
    cold_memory = cold_cache["DeviceShare"]
    assert isinstance(cold_memory, FleetMemory)
    assert memory.counted - counted_first < cold_memory.counted


def test_a_full_memory_starts_over_and_still_answers() -> None:
    snapshot = build_snapshot(48, 300, 30)
    expected = plan_round(snapshot).to_dict()
    cache: dict[str, object] = {"DeviceShare": FleetMemory(limit=2)}
    assert plan_round(replace(snapshot, engine_cache=cache)).to_dict() == expected
    memory = cache["DeviceShare"]
    assert isinstance(memory, FleetMemory)
    assert memory.counted > 2  # it filled up and was emptied on the way
    assert plan_round(replace(snapshot, engine_cache=cache)).to_dict() == expected


def test_equal_layouts_share_an_id_across_fleets() -> None:
    snapshot = build_snapshot(4, 10, 2)
    memory = FleetMemory()
    cards = snapshot.nodes[0].devices
    one = build_node_devices("a", cards)
    other = build_node_devices("b", tuple(cards))  # another tuple, the same cards
    assert memory.layout_id(one) == memory.layout_id(other)
    assert memory.layout_id(build_node_devices("c", cards[:4])) != memory.layout_id(one)


def test_the_per_node_memo_keeps_the_last_two_counts_of_each_node() -> None:
    memo = Memo(4)
    nodes = np.array([0, 2, 3], dtype=np.int64)
    bits = np.array([1, 2, 3], dtype=np.uint64)

    def remember(groups: list[int], fits: list[int]) -> None:
        limits = np.full(3, 16, dtype=np.int64)
        memo.remember_all(nodes, np.array(groups), bits, np.array(fits), limits)

    def recall(groups: list[int], asked: int = 4) -> list[int | None]:
        fits, known = memo.recall(nodes, np.array(groups), bits, asked)
        return [int(f) if k else None for f, k in zip(fits, known, strict=True)]

    remember([5, 6, 7], [1, 2, 3])
    remember([8, 9, 10], [4, 5, 6])
    assert recall([5, 6, 7]) == [1, 2, 3]
    assert recall([8, 9, 10]) == [4, 5, 6]  # read last: the other way is replaced next
    remember([11, 12, 13], [7, 8, 9])
    assert recall([5, 6, 7]) == [None, None, None]
    assert recall([8, 9, 10]) == [4, 5, 6]
    assert recall([11, 12, 13]) == [7, 8, 9]
    remember([14, 15, 16], [16, 3, 16])  # two nodes counted up to the limit, 16 fit
    assert recall([14, 15, 16], asked=20) == [None, 3, None]  # more than 16: count again
    assert recall([14, 15, 16], asked=16) == [16, 3, 16]
