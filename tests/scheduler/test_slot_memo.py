"""The offer-slot memo (`scheduler.slot_memo`): counts stay what a full count gives, and only the
nodes that moved since the same template runs were counted are asked again."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from scheduler import slot_memo
from scheduler.cycle import Framework
from scheduler.framework import IntArray
from scheduler.model import JobInfo, PodInfo
from scheduler.plugins.resources import NodeResourcesFit
from scheduler.slot_memo import SlotMemo
from scheduler.state import CycleState
from tests.scheduler.builders import CORE, cluster, gang, node, pod


class CountingFit(NodeResourcesFit):
    """NodeResourcesFit that records the node indices it is asked about."""

    def __init__(self) -> None:
        super().__init__({}, Framework(CORE))
        self.asked: list[list[int]] = []

    def slot_limits(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> IntArray | None:
        self.asked.append(node_indices.tolist())
        return super().slot_limits(state, job, pods, node_indices)


def three_nodes() -> cluster:
    return cluster().node(node("a").cpu(16), node("b").cpu(16), node("c").cpu(16))


def eight_nodes() -> cluster:
    """Enough nodes that one moved node is under a quarter of them (else all are recounted)."""
    return cluster().node(*[node(f"n{i}").cpu(16) for i in range(8)])


def full_count(plugin: CountingFit, state: CycleState, job: JobInfo) -> list[int]:
    everywhere = np.arange(len(state.nodes), dtype=np.int64)
    counted = plugin.slot_limits(state, job, state.pending_pods(job), everywhere)
    assert counted is not None
    return counted.tolist()


@pytest.mark.parametrize("short_tail", [256, 0])  # moves read one by one, or per node
def test_only_the_nodes_moved_since_are_counted_again(
    short_tail: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slot_memo, "SHORT_TAIL", short_tail)
    snap = eight_nodes().submit(gang("ml/g", pods=4).cpu(4), gang("ml/h", pods=2).cpu(8))
    state = CycleState(snap.snapshot())
    plugin, memo = CountingFit(), SlotMemo(state)
    job = state.jobs["ml/g"]
    pods = state.pending_pods(job)
    runs = memo.runs(state, pods)
    b = state.node_index["n1"]

    def counted() -> list[int]:
        slots = memo.slot_limits(plugin, state, job, pods, runs)
        assert slots is not None
        return slots.tolist()

    assert counted() == [4] * 8
    assert plugin.asked == [list(range(8))]
    assert counted() == [4] * 8  # nothing moved: not asked again
    assert len(plugin.asked) == 1
    state.assume({"ml/h-1": b, "ml/h-2": b})
    assert counted() == [4, 0, 4, 4, 4, 4, 4, 4]
    assert plugin.asked[-1] == [b]
    assert counted() == full_count(plugin, state, job)
    state.forget({"ml/h-2": b})
    assert counted() == [4, 2, 4, 4, 4, 4, 4, 4]
    assert plugin.asked[-1] == [b]
    assert counted() == full_count(plugin, state, job)


def test_other_templates_or_counts_are_not_answered_from_one_another() -> None:
    snap = three_nodes().submit(
        gang("ml/small", pods=2).cpu(4),
        gang("ml/big", pods=2).cpu(12),
        gang("ml/one", pods=1).cpu(4),
    )
    state = CycleState(snap.snapshot())
    plugin, memo = CountingFit(), SlotMemo(state)
    answers = {}
    for name in ("ml/small", "ml/big", "ml/one"):
        job = state.jobs[name]
        pods = state.pending_pods(job)
        slots = memo.slot_limits(plugin, state, job, pods, memo.runs(state, pods))
        assert slots is not None
        answers[name] = slots.tolist()
    assert answers == {"ml/small": [2, 2, 2], "ml/big": [1, 1, 1], "ml/one": [1, 1, 1]}
    assert len(plugin.asked) == 3  # each counted over every node, none recalled
    small, one = (
        state.pending_pods(state.jobs["ml/small"]),
        state.pending_pods(state.jobs["ml/one"]),
    )
    assert memo.runs(state, small)[0][0] == memo.runs(state, one)[0][0]  # one template
    assert memo.runs(state, small) != memo.runs(state, one)  # counted apart


def test_many_moved_nodes_are_counted_again_everywhere() -> None:
    c = eight_nodes().submit(gang("ml/g", pods=1).cpu(4), gang("ml/fill", pods=8).cpu(16))
    state = CycleState(c.snapshot())
    plugin, memo = CountingFit(), SlotMemo(state)
    job = state.jobs["ml/g"]
    pods = state.pending_pods(job)
    memo.slot_limits(plugin, state, job, pods, memo.runs(state, pods))
    state.assume({f"ml/fill-{i + 1}": i for i in range(3)})  # 3 of 8 nodes: past a quarter
    slots = memo.slot_limits(plugin, state, job, pods, memo.runs(state, pods))
    assert slots is not None and slots.tolist() == [0, 0, 0, 1, 1, 1, 1, 1]
    assert plugin.asked[-1] == list(range(8))


def test_a_dry_run_is_counted_with_its_released_pods_gone() -> None:
    # The framework asks the memo only outside dry runs: inside one, the released CPUs count.
    c = cluster().node(node("a").cpu(16), node("b").cpu(16))
    c.running(pod("low").cpu(16).priority(1).on("a"))
    c.submit(gang("ml/g", pods=1).cpu(8).priority(9))
    state = CycleState(c.snapshot())
    framework = Framework(CORE)
    framework.start(state)
    job = state.jobs["ml/g"]
    pods = state.pending_pods(job)
    assert framework.offer_slots(state, job, pods).tolist() == [0, 1]
    released = np.zeros_like(state.allocatable)
    released[state.node_index["a"]] = state.vector(state.pods["default/low"])
    gone = np.ones(len(state.bound_keys), dtype=np.bool_)
    with state.releasing(released, gone):
        assert framework.offer_slots(state, job, pods).tolist() == [1, 1]
    assert framework.offer_slots(state, job, pods).tolist() == [0, 1]


def test_every_move_of_a_node_is_logged_as_touched() -> None:
    state = CycleState(three_nodes().submit(gang("ml/g", pods=2).cpu(4)).snapshot())
    a, c = state.node_index["a"], state.node_index["c"]
    state.assume({"ml/g-1": a, "ml/g-2": c})
    state.forget({"ml/g-1": a})
    assert state.touched == [a, c, a]


class Unconstrained:
    """A slot-limit plugin that never limits (answers None) and counts how often it is asked."""

    name = "Unconstrained"

    def __init__(self) -> None:
        self.asked = 0

    def slot_limits(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> IntArray | None:
        self.asked += 1
        return None


def test_an_unconstrained_answer_is_remembered_across_moves() -> None:
    state = CycleState(eight_nodes().submit(gang("ml/g", pods=2).cpu(4)).snapshot())
    plugin, memo = Unconstrained(), SlotMemo(state)
    job = state.jobs["ml/g"]
    pods = state.pending_pods(job)
    assert memo.slot_limits(plugin, state, job, pods, memo.runs(state, pods)) is None
    state.assume({"ml/g-1": 0})
    pods = state.pending_pods(job)  # one left: other runs, asked again
    assert memo.slot_limits(plugin, state, job, pods, memo.runs(state, pods)) is None
    assert memo.slot_limits(plugin, state, job, pods, memo.runs(state, pods)) is None
    assert plugin.asked == 2
