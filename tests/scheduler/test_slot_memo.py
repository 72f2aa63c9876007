"""The offer-slot memo (`scheduler.slot_memo`): counts stay what a full count gives, and only the
nodes that moved since the same template runs were counted are asked again."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

import numpy as np
import pytest

from scheduler import slot_memo
from scheduler.cycle import Framework
from scheduler.framework import BoolArray, IntArray
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
    # Inside a dry run the released CPUs count; outside, the counts are the live ones again.
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


def busy_eight_nodes() -> cluster:
    """Eight 16-CPU nodes, each half used by two low pods of 4 CPUs (`low-<node>-<k>`)."""
    c = eight_nodes()
    for i in range(8):
        c.running(*[pod(f"low-{i}-{k}").cpu(4).priority(1).on(f"n{i}") for k in range(2)])
    return c.submit(gang("ml/g", pods=2).cpu(6).priority(9), gang("ml/h", pods=8).cpu(4))


def release_of(state: CycleState, names: Iterable[str]) -> tuple[IntArray, BoolArray]:
    """What a dry run releasing these bound pods passes to `state.releasing` (new arrays)."""
    gone = {f"default/{name}" for name in names}
    mask = np.array([key in gone for key in state.bound_keys], dtype=np.bool_)
    released = np.zeros_like(state.allocatable)
    for key in gone:
        released[state.node_index[state.pods[key].node or ""]] += state.vector(state.pods[key])
    return released, mask


def test_a_dry_run_is_counted_again_only_where_its_release_or_the_node_moved() -> None:
    state = CycleState(busy_eight_nodes().snapshot())
    plugin, memo = CountingFit(), SlotMemo(state)
    job = state.jobs["ml/g"]
    pods = state.pending_pods(job)
    runs = memo.runs(state, pods)

    def counted(*names: str) -> tuple[list[int], list[list[int]]]:
        """The memo's counts with these pods released, and the nodes it asked the plugin."""
        before = len(plugin.asked)
        with state.releasing(*release_of(state, names)):
            slots = memo.slot_limits(plugin, state, job, pods, runs)
            asked = plugin.asked[before:]
            assert slots is not None
            assert slots.tolist() == full_count(plugin, state, job)
            return slots.tolist(), asked

    assert counted("low-0-0", "low-1-0") == ([2, 2, 1, 1, 1, 1, 1, 1], [list(range(8))])
    # Released on n1 no more, on n2 now: those two are asked again.
    assert counted("low-0-0", "low-2-0") == ([2, 1, 2, 1, 1, 1, 1, 1], [[1, 2]])
    assert counted("low-0-0", "low-2-0") == ([2, 1, 2, 1, 1, 1, 1, 1], [])
    state.assume({"ml/h-1": 5})  # only n5 moved since
    assert counted("low-0-0", "low-2-0") == ([2, 1, 2, 1, 1, 0, 1, 1], [[5]])
    # Live counts are kept apart from the dry ones.
    live = memo.slot_limits(plugin, state, job, pods, runs)
    assert live is not None and live.tolist() == [1, 1, 1, 1, 1, 0, 1, 1]


@pytest.mark.parametrize("seed", range(6))
def test_dry_and_live_counts_stay_full_counts_through_releases_and_moves(seed: int) -> None:
    rng = random.Random(seed)
    state = CycleState(busy_eight_nodes().snapshot())
    plugin, memo = CountingFit(), SlotMemo(state)
    lows = [key.split("/")[1] for key in state.bound_keys]
    movers = [f"ml/h-{k + 1}" for k in range(8)]
    for _ in range(40):
        step = rng.random()
        if step < 0.2 and movers:  # a pod of ml/h placed: its node moves
            state.assume({movers.pop(): rng.randrange(8)})
        elif step < 0.3 and state.assumed:
            key = rng.choice(sorted(state.assumed))
            state.forget({key: state.assumed[key]})
            movers.append(key)
        job = state.jobs[rng.choice(("ml/g", "ml/h"))]
        pods = state.pending_pods(job)
        if not pods:
            continue
        if rng.random() < 0.7:
            gone = rng.sample(lows, rng.randrange(len(lows) + 1))
            with state.releasing(*release_of(state, gone)):
                slots = memo.slot_limits(plugin, state, job, pods, memo.runs(state, pods))
                assert slots is not None and slots.tolist() == full_count(plugin, state, job)
        else:
            slots = memo.slot_limits(plugin, state, job, pods, memo.runs(state, pods))
            assert slots is not None and slots.tolist() == full_count(plugin, state, job)


def test_template_ids_are_equal_exactly_when_templates_are() -> None:
    snap = three_nodes().submit(
        gang("ml/a", pods=3).cpu(4), gang("ml/b", pods=2).cpu(4), gang("ml/c", pods=2).cpu(8)
    )
    state = CycleState(snap.snapshot())
    pods = list(state.pods.values())
    for p in pods:
        for q in pods:
            same = state.template(p) == state.template(q)
            assert (state.template_id(p) == state.template_id(q)) == same


def test_runs_asked_again_are_the_runs_counted_afresh() -> None:
    snap = three_nodes().submit(gang("ml/a", pods=3).cpu(4), gang("ml/c", pods=2).cpu(8))
    state = CycleState(snap.snapshot())
    memo = SlotMemo(state)
    mixed = [*state.pending_pods(state.jobs["ml/a"]), *state.pending_pods(state.jobs["ml/c"])]
    for pods in (mixed, mixed[1:], mixed[::-1], mixed, mixed[:1]):
        assert memo.runs(state, pods) == SlotMemo(state).runs(state, pods)
    a, c = state.template_id(mixed[0]), state.template_id(mixed[-1])
    assert memo.runs(state, mixed) == ((a, 3), (c, 2))
    assert memo.runs(state, mixed[::-1]) == ((c, 2), (a, 3))
