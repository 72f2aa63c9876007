"""Job-level preemption: whole-job victims, protections, budgets, costs, nominations, waiting."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from scheduler import PDBInfo, apply_round, plan_round
from scheduler.cycle import Framework
from scheduler.framework import Plan
from scheduler.plugins import preemption, preemption_node_picks, preemption_plans
from scheduler.state import CycleState
from scheduler.victims import BudgetBook, VictimPool
from tests.scheduler.builders import CORE, SPINE_BLOCK, cluster, gang, node, pod


def two_nodes() -> cluster:
    return cluster().node(node("a").cpu(16), node("b").cpu(16))


def test_victims_are_whole_jobs() -> None:
    c = two_nodes()
    c.running(pod("low-a").cpu(16).priority(1).job("batch/low").on("a"))
    c.running(pod("low-b").cpu(16).priority(1).job("batch/low").on("b"))
    [record] = plan_round(
        c.submit(gang("ml/g", pods=1).cpu(16).priority(9)).snapshot(), CORE
    ).preemptions
    assert record.victim_jobs == ("batch/low",)
    assert record.victim_pods == ("default/low-a", "default/low-b")


def test_cheapest_plan_prefers_lower_victim_priority_then_fewer_jobs() -> None:
    c = two_nodes()
    c.running(pod("mid").cpu(16).priority(5).on("a"))
    c.running(pod("low-1").cpu(8).priority(1).on("b"), pod("low-2").cpu(8).priority(1).on("b"))
    [record] = plan_round(
        c.submit(gang("ml/g", pods=1).cpu(16).priority(9)).snapshot(), CORE
    ).preemptions
    assert record.victim_pods == ("default/low-1", "default/low-2")
    assert record.cost["highest_victim_priority"] == 1
    assert record.cost["victim_jobs"] == 2


def test_minimal_victims_keep_back_what_is_not_needed() -> None:
    c = cluster().node(node("a").cpu(32))
    c.running(pod("low-1").cpu(8).priority(1).on("a"), pod("low-2").cpu(8).priority(2).on("a"))
    c.running(pod("low-3").cpu(16).priority(3).on("a"))
    result = plan_round(c.submit(gang("ml/g", pods=1).cpu(16).priority(9)).snapshot(), CORE)
    [record] = result.preemptions
    # keeping back the priority-3 pod first still leaves room once the two small ones go
    assert record.victim_pods == ("default/low-1", "default/low-2")


def test_protected_pods_and_higher_priorities_are_never_victims() -> None:
    c = two_nodes()
    c.running(
        pod("keep")
        .cpu(16)
        .priority(1)
        .label("scheduling.koordinator.sh/disable-preemptible", "true")
        .on("a")
    )
    c.running(
        pod("keep-q")
        .cpu(16)
        .priority(1)
        .label("quota.scheduling.koordinator.sh/preemptible", "false")
        .on("b")
    )
    result = plan_round(c.submit(gang("ml/g", pods=1).cpu(16).priority(9)).snapshot(), CORE)
    assert result.preemptions == ()
    assert result.unschedulable["ml/g"].details["preemption"]["reason"] == "no potential victims"


def test_preemption_not_helpful_when_even_all_victims_are_not_enough() -> None:
    c = two_nodes().running(pod("low").cpu(16).priority(1).on("a"))
    c.running(pod("high").cpu(16).priority(100).on("b"))
    result = plan_round(c.submit(gang("ml/g", pods=2).cpu(16).priority(9)).snapshot(), CORE)
    assert result.preemptions == ()
    reason = result.unschedulable["ml/g"].details["preemption"]["reason"]
    assert reason.startswith("preemption not helpful")


def test_never_policy_gets_a_counterfactual_instead() -> None:
    c = two_nodes().running(
        pod("low").cpu(16).priority(1).on("a"), pod("x").cpu(16).priority(1).on("b")
    )
    result = plan_round(
        c.submit(gang("ml/g", pods=1).cpu(16).priority(9).never_preempt()).snapshot(), CORE
    )
    assert result.preemptions == ()
    verdict = result.unschedulable["ml/g"]
    assert verdict.details["counterfactual"]["evict_jobs"] == ["default/low"]
    assert (
        verdict.details["preemption"]["reason"]
        == "preemption not allowed (preemptionPolicy: Never)"
    )


def test_disruption_budget_steers_to_another_victim_set() -> None:
    c = two_nodes()
    c.running(pod("guarded").cpu(16).priority(1).label("app", "db").on("a"))
    c.running(pod("free").cpu(16).priority(1).on("b"))
    c.pdb(PDBInfo("default", "db", {"app": "db"}, min_available=1))
    [record] = plan_round(
        c.submit(gang("ml/g", pods=1).cpu(16).priority(9)).snapshot(), CORE
    ).preemptions
    assert record.victim_pods == ("default/free",)


def test_disruption_budget_blocks_when_no_other_set_works() -> None:
    c = cluster().node(node("a").cpu(16))
    c.running(pod("guarded").cpu(16).priority(1).label("app", "db").on("a"))
    c.pdb(PDBInfo("default", "db", {"app": "db"}, max_unavailable=0))
    result = plan_round(c.submit(gang("ml/g", pods=1).cpu(16).priority(9)).snapshot(), CORE)
    assert result.preemptions == ()
    reason = result.unschedulable["ml/g"].details["preemption"]["reason"]
    assert reason == "preemption blocked by PodDisruptionBudget default/db"


def test_victims_are_not_taken_twice_in_one_round() -> None:
    c = cluster().node(node("a").cpu(16)).running(pod("low").cpu(16).priority(1).on("a"))
    c.submit(
        gang("ml/first", pods=1).cpu(16).priority(9), gang("ml/second", pods=1).cpu(16).priority(8)
    )
    result = plan_round(c.snapshot(), CORE)
    assert [r.preemptor for r in result.preemptions] == ["ml/first"]


def test_nominated_resources_are_held_for_the_preemptor_next_round() -> None:
    c = cluster().node(node("a").cpu(16)).running(pod("low").cpu(16).priority(1).on("a"))
    snap = c.submit(gang("ml/big", pods=1).cpu(16).priority(9)).snapshot()
    first = plan_round(snap, CORE)
    after = apply_round(snap, first)
    # a newcomer of higher priority than the victim but submitted later must not steal node a
    intruder = replace(pod("intruder").cpu(16).priority(5).build(), job_id="default/intruder")
    after = replace(after, pods=(*after.pods, intruder))
    second = plan_round(after, CORE)
    assert second.placements["ml/big-1"].node == "a"
    assert "default/intruder" not in second.placements
    assert second.decisions["ml/big"]["nominated"] is True


def test_a_job_of_higher_priority_than_the_nominated_one_may_take_its_reservation() -> None:
    c = cluster().node(node("a").cpu(16))
    snap = c.submit(gang("ml/big", pods=1).cpu(16).priority(5)).snapshot()
    pods = tuple(replace(p, nominated_node="a") if p.job_id == "ml/big" else p for p in snap.pods)
    # kube-scheduler's rule: a nominated pod holds its node against lower or equal priority only
    urgent = replace(pod("urgent").cpu(16).priority(9).build(), job_id="default/urgent")
    equal = replace(pod("equal").cpu(16).priority(5).build(), job_id="default/equal")
    for newcomer, takes in ((urgent, True), (equal, False)):
        result = plan_round(replace(snap, pods=(*pods, newcomer)), CORE)
        placed = result.placements.get(newcomer.key)
        assert (placed is not None and placed.node == "a") is takes, newcomer.name
        assert "ml/big-1" not in result.placements or not takes


def test_waits_while_a_victim_is_still_terminating_on_the_nominated_node() -> None:
    c = (
        cluster()
        .node(node("a").cpu(16))
        .running(pod("low").cpu(16).priority(1).on("a").terminating())
    )
    snap = c.submit(gang("ml/big", pods=1).cpu(16).priority(9)).snapshot()
    pods = tuple(replace(p, nominated_node="a") if p.job_id == "ml/big" else p for p in snap.pods)
    result = plan_round(replace(snap, pods=pods), CORE)
    assert result.preemptions == ()
    verdict = result.unschedulable["ml/big"]
    assert verdict.code == "Wait"
    assert (
        verdict.details["preemption"]["reason"]
        == "waiting for preemption victims to terminate on a"
    )


def test_the_cheapest_nodes_of_a_domain_are_found_beyond_the_reference_order() -> None:
    # One block of eight nodes: the first two (by name) run a mid-priority job, the last two a
    # low-priority one, the rest a high one. The reference order would take n1, n2 (priority 5);
    # the cheapest plan takes n7, n8 (priority 1).
    c = cluster().topology(SPINE_BLOCK)
    for i in range(1, 9):
        c.node(node(f"n{i}").cpu(16).spine("s1").block("b1"))
    c.running(pod("mid-1").cpu(16).priority(5).job("batch/mid").on("n1"))
    c.running(pod("mid-2").cpu(16).priority(5).job("batch/mid").on("n2"))
    for i in range(3, 7):
        c.running(pod(f"high-{i}").cpu(16).priority(8).job(f"batch/high-{i}").on(f"n{i}"))
    c.running(pod("low-7").cpu(16).priority(1).job("batch/low").on("n7"))
    c.running(pod("low-8").cpu(16).priority(1).job("batch/low").on("n8"))
    snap = c.submit(gang("ml/g", pods=2).cpu(16).must_gather("BlockLayer").priority(9)).snapshot()
    [record] = plan_round(snap, CORE).preemptions
    assert record.victim_jobs == ("batch/low",)
    assert sorted(record.nominations.values()) == ["n7", "n8"]


def test_a_node_whose_lowest_victim_suffices_is_not_skipped_for_its_highest() -> None:
    # a: victims at priorities 1 and 7, but evicting the 1 is enough; b: one victim at 5.
    c = two_nodes()
    c.running(pod("low").cpu(8).priority(1).on("a"), pod("high").cpu(8).priority(7).on("a"))
    c.running(pod("mid").cpu(16).priority(5).on("b"))
    [record] = plan_round(
        c.submit(gang("ml/g", pods=1).cpu(8).priority(9)).snapshot(), CORE
    ).preemptions
    assert record.victim_pods == ("default/low",)
    assert record.cost["highest_victim_priority"] == 1


def test_a_release_adjusted_from_the_last_one_equals_a_fresh_one() -> None:
    c = cluster().node(*(node(f"n{i}").cpu(256) for i in range(4)))
    for i in range(80):  # 40 jobs of two pods, most spanning two nodes
        c.running(pod(f"p{i}").cpu(1 + i % 3).priority(1).job(f"batch/j{i % 40}").on(f"n{i % 4}"))
    state = CycleState(c.snapshot())
    pool = VictimPool(state)
    everyone = np.arange(len(pool.jobs), dtype=np.int64)
    pool.release(state, everyone)
    for jobs in (everyone[1:], everyone[:-1], everyone):  # a few jobs differ each time
        freed, pods = pool.release(state, jobs)
        fresh_freed, fresh_pods = VictimPool(state).release(state, jobs)
        assert (freed == fresh_freed).all() and (pods == fresh_pods).all()
    assert pods.all() and freed.sum() > 0


def test_the_pairs_on_some_nodes_are_every_node_job_pair_there_in_node_order() -> None:
    c = cluster().node(*(node(f"n{i}").cpu(256) for i in range(6)))
    for i in range(30):  # jobs spanning nodes, and n5 with none
        c.running(pod(f"p{i}").cpu(1).priority(1).job(f"batch/j{i % 7}").on(f"n{i % 5}"))
    state = CycleState(c.snapshot())
    pool = VictimPool(state)
    for nodes in ([0, 1, 2, 3, 4, 5], [1, 3], [5], [0, 5], []):
        pairs = pool.pairs_on(np.array(nodes, dtype=np.int64))
        expected = [k for k, n in enumerate(pool.pair_node.tolist()) if n in nodes]
        assert pairs.tolist() == expected


def test_a_domains_node_picks_are_remembered_by_slots_pairs_and_pods_wanted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = cluster().node(*(node(f"n{i}").cpu(16) for i in range(4)))
    for i in range(8):
        c.running(pod(f"p{i}").cpu(4).priority(1 + i % 3).job(f"batch/j{i}").on(f"n{i % 4}"))
    state = CycleState(c.snapshot())
    book = preemption_plans.PreemptionBook(
        VictimPool(state), BudgetBook([], []), np.zeros(8, dtype=np.bool_)
    )
    pool = book.pool
    counted: list[int] = []
    cheapest = preemption_node_picks._cheapest_nodes

    def counting(*args: Any) -> Any:
        counted.append(1)
        return cheapest(*args)

    monkeypatch.setattr(preemption_node_picks, "_cheapest_nodes", counting)
    usable = np.arange(4, dtype=np.int64)
    every_pair = pool.pairs_on(usable)
    slots = np.array([1, 2, 1, 1], dtype=np.int64)

    def picks(slots: np.ndarray, pairs: np.ndarray, wanted: int) -> Any:
        found = preemption_node_picks.node_picks(
            book.node_picks, pool, usable, pairs, slots, wanted
        )
        fresh = (
            cheapest(pool, usable, pairs, slots, wanted),
            preemption_node_picks._fewest_new_victims(pool, usable, pairs, slots, wanted),
        )
        assert [None if a is None else a.tolist() for a in found] == [
            None if a is None else a.tolist() for a in fresh
        ]
        return found

    picks(slots, every_pair, 2)
    picks(slots, every_pair, 2)
    assert len(counted) == 1  # the same question: remembered
    picks(np.array([1, 0, 1, 1], dtype=np.int64), every_pair, 2)  # other slots
    picks(slots, every_pair[1:], 2)  # a job no longer eligible
    picks(slots, every_pair, 3)  # more pods
    assert len(counted) == 4


def test_one_usable_node_is_picked_as_both_functions_pick_it() -> None:
    c = cluster().node(*(node(f"n{i}").cpu(16) for i in range(3)))
    c.running(pod("p0").cpu(4).priority(5).job("batch/j0").on("n1"))
    c.running(pod("p1").cpu(4).priority(1).job("batch/j1").on("n1"))
    state = CycleState(c.snapshot())
    book = preemption_plans.PreemptionBook(
        VictimPool(state), BudgetBook([], []), np.zeros(2, dtype=np.bool_)
    )
    pool = book.pool
    for only in (0, 1):  # a node without victims, one with two
        usable = np.array([only], dtype=np.int64)
        for pairs in (pool.pairs_on(usable), pool.pairs_on(usable)[:0]):
            for free, wanted in ((3, 2), (2, 2), (1, 2), (0, 1)):
                slots = np.array([free] * 3, dtype=np.int64)
                found = preemption_node_picks.node_picks(
                    book.node_picks, pool, usable, pairs, slots, wanted
                )
                fresh = (
                    preemption_node_picks._cheapest_nodes(pool, usable, pairs, slots, wanted),
                    preemption_node_picks._fewest_new_victims(pool, usable, pairs, slots, wanted),
                )
                assert [None if a is None else a.tolist() for a in found] == [
                    None if a is None else a.tolist() for a in fresh
                ]


def test_a_plans_resource_weight_divides_by_the_clusters_allocatable() -> None:
    c = cluster().node(node("a").cpu(16), node("b").cpu(8))
    c.running(pod("low").cpu(6).priority(1).job("batch/low").on("a"))
    state = CycleState(c.snapshot())
    book = preemption_plans.PreemptionBook(
        VictimPool(state), BudgetBook([], []), np.zeros(1, dtype=np.bool_)
    )
    totals = preemption_plans._totals(state, book)
    summed = state.totals()
    assert totals == {r: max(1, int(summed[i])) for r, i in state.resource_index.items()}
    assert totals["cpu"] == 24_000
    plan = Plan({"ml/g-1": 0})
    costed = preemption_plans.costed_plan(state, plan, book.pool.jobs, book, 0)
    assert costed.cost["resources"] == {"cpu": 6_000}
    assert costed.key[3] == 6_000 / 24_000
    assert costed.cost["victim_pods"] == 1 and costed.violations == {}


class CountingMemo(dict):  # type: ignore[type-arg]
    """`PreemptionBook.reprieved` that counts its hits, or (`forget`) never has an answer."""

    def __init__(self, forget: bool = False) -> None:
        super().__init__()
        self.forget, self.hits = forget, 0

    def __contains__(self, key: object) -> bool:
        found = not self.forget and super().__contains__(key)
        self.hits += found
        return found


def test_a_plan_seen_in_an_earlier_search_keeps_the_victims_a_fresh_search_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Eight nodes of low jobs and six preemptors of one shape: each search plans on nodes the
    # searches before it already costed, untouched since.
    c = cluster().node(*(node(f"n{i}").cpu(16) for i in range(8)))
    for i in range(8):
        c.running(pod(f"low-{i}-a").cpu(8).priority(1 + i % 3).job(f"batch/a{i}").on(f"n{i}"))
        c.running(pod(f"low-{i}-b").cpu(4).priority(2).job(f"batch/b{i}").on(f"n{i}"))
    for k in range(6):
        c.submit(gang(f"ml/g{k}", pods=1).cpu(12).priority(9))
    snap = c.snapshot()
    memos: list[CountingMemo] = []

    def book_with(forget: bool) -> type:
        class Book(preemption.PreemptionBook):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                memos.append(CountingMemo(forget))
                self.reprieved = memos[-1]

        return Book

    # The plugin makes its book by the name it imported: patch it there.
    monkeypatch.setattr(preemption, "PreemptionBook", book_with(forget=False))
    remembered = plan_round(snap, CORE)
    assert memos[-1].hits > 0
    monkeypatch.setattr(preemption, "PreemptionBook", book_with(forget=True))
    fresh = plan_round(snap, CORE)
    assert memos[-1].hits == 0
    assert len(remembered.preemptions) == 6
    assert remembered.preemptions == fresh.preemptions
    assert remembered.unschedulable == fresh.unschedulable


def test_a_node_version_moves_only_with_the_pods_taken_onto_or_given_back_from_it() -> None:
    state = CycleState(two_nodes().submit(gang("ml/g", pods=2).cpu(4)).snapshot())
    a, b = state.node_index["a"], state.node_index["b"]
    assert state.node_version == [0, 0]
    state.assume({"ml/g-1": a})
    assert state.node_version[a] == 1 and state.node_version[b] == 0
    state.forget({"ml/g-1": a})
    assert state.node_version[a] == 2 and state.node_version[b] == 0


def test_a_remembered_plan_is_costed_again_once_pods_are_taken_onto_its_node() -> None:
    # a (4 CPUs, priority 1) and b (4, priority 2) on a 16-CPU node. A 10-CPU pod needs only a
    # gone; once 4 more CPUs are taken there it needs both.
    c = cluster().node(node("n").cpu(16))
    c.running(pod("a").cpu(4).priority(1).on("n"), pod("b").cpu(4).priority(2).on("n"))
    c.submit(gang("ml/big", pods=1).cpu(10).priority(9), gang("ml/filler", pods=1).cpu(4))
    state = CycleState(c.snapshot())
    framework = Framework(CORE)
    framework.start(state)
    plugin = framework.plugin("JobPreemption")
    assert isinstance(plugin, preemption.JobPreemption)
    book = plugin.book(state)
    job = state.jobs["ml/big"]
    pods = state.pending_pods(job)
    plan = Plan({"ml/big-1": state.node_index["n"]})
    everyone = np.ones(len(book.pool.jobs), dtype=np.bool_)

    def victims() -> list[str]:
        with state.releasing(*book.pool.release(state, np.flatnonzero(everyone))):
            found = plugin._victims_for(state, job, pods, plan, everyone, {}, 0)
        assert found is not None
        return [v.id for v in found.victims]

    assert victims() == ["default/a"]
    assert victims() == ["default/a"]  # remembered
    state.assume({"ml/filler-1": state.node_index["n"]})
    assert victims() == ["default/a", "default/b"]


def test_victims_come_from_the_lowest_priority_band_across_every_domain() -> None:
    # Two blocks. b1 (first by name, and so the dry run's first candidate) runs one job of
    # priority 7 on both nodes; b2 runs two jobs of priority 1 on each node. With one candidate
    # domain the plan used to evict the priority-7 job; kube-scheduler's lexicographic rule
    # (lowest highest-victim priority first, then fewest victims) takes the four in b2.
    c = cluster().topology(SPINE_BLOCK)
    for name, block in (("a1", "b1"), ("a2", "b1"), ("c1", "b2"), ("c2", "b2")):
        c.node(node(name).cpu(16).spine("s1").block(block))
    c.running(pod("mid-1").cpu(16).priority(7).job("batch/mid").on("a1"))
    c.running(pod("mid-2").cpu(16).priority(7).job("batch/mid").on("a2"))
    for i, where in enumerate(("c1", "c1", "c2", "c2")):
        c.running(pod(f"low-{i}").cpu(8).priority(1).job(f"batch/low-{i}").on(where))
    snap = c.submit(gang("ml/g", pods=2).cpu(16).must_gather("BlockLayer").priority(9)).snapshot()
    profile = CORE.with_args("JobPreemption", candidateLimit=1)
    [record] = plan_round(snap, profile).preemptions
    assert record.cost["highest_victim_priority"] == 1
    assert sorted(record.victim_jobs) == [f"batch/low-{i}" for i in range(4)]
    assert sorted(record.nominations.values()) == ["c1", "c2"]
