"""Gangs all-or-nothing, min-available, queue order, determinism and the result's JSON shape."""

from __future__ import annotations

import json
from dataclasses import replace

from scheduler import GangInfo, JobInfo, gang_group_id, plan_round
from scheduler.state import CycleState
from tests.scheduler.builders import CORE, REFERENCE, cluster, gang, node, pod


def test_gang_is_all_or_nothing() -> None:
    c = cluster().node(node("a").cpu(8), node("b").cpu(8))
    result = plan_round(c.submit(gang("ml/g", pods=5).cpu(4)).snapshot(), CORE)
    assert result.placements == {}
    assert result.unschedulable["ml/g"].code == "Unschedulable"


def test_min_available_gang_starts_with_its_minimum() -> None:
    c = cluster().node(node("a").cpu(8), node("b").cpu(8))
    result = plan_round(c.submit(gang("ml/g", pods=6, min_available=4).cpu(4)).snapshot(), CORE)
    assert sorted(result.placements) == ["ml/g-1", "ml/g-2", "ml/g-3", "ml/g-4"]


def test_gang_waits_until_min_available_pods_exist() -> None:
    job, pods = gang("ml/g", pods=2).cpu(1).build()
    job = replace(job, gangs=(GangInfo("ml/g", 3, 3),))
    snap = replace(cluster().node(node("a").cpu(8)).snapshot(), pods=tuple(pods), jobs=(job,))
    verdict = plan_round(snap, CORE).unschedulable["ml/g"]
    assert verdict.code == "Wait"
    assert "has 2 of min-available 3 pods" in verdict.reason


def test_gang_group_places_member_gangs_together_or_not_at_all() -> None:
    _, workers = gang("ml/workers", pods=2).cpu(4).build()
    _, ps = gang("ml/ps", pods=1).cpu(4).build()
    group = gang_group_id(["ml/workers", "ml/ps"])
    assert group == "ml/ps,ml/workers"
    pods = [replace(p, job_id=group) for p in workers + ps]
    job = JobInfo(
        group,
        tuple(p.key for p in pods),
        (GangInfo("ml/workers", 2, 2), GangInfo("ml/ps", 1, 1)),
    )
    small = cluster().node(node("a").cpu(8)).snapshot()
    result = plan_round(replace(small, pods=tuple(pods), jobs=(job,)), CORE)
    assert result.placements == {}  # room for two of three: the whole group waits
    big = cluster().node(node("a").cpu(12)).snapshot()
    result = plan_round(replace(big, pods=tuple(pods), jobs=(job,)), CORE)
    assert len(result.placements) == 3


def test_queue_order_priority_then_submission_then_id() -> None:
    c = cluster().node(node("a").cpu(4))
    c.submit(
        gang("ml/late-high", pods=1).cpu(4).priority(10).submitted_at(5),
        gang("ml/early-low", pods=1).cpu(4).priority(1).submitted_at(1),
        gang("ml/b", pods=1).cpu(4).priority(10).submitted_at(5),
    )
    result = plan_round(c.snapshot(), CORE)
    assert list(result.placements) == ["ml/b-1"]  # ml/b and ml/late-high tie, id decides


def test_largest_first_option_orders_equal_priorities_by_what_they_ask() -> None:
    # One 8-CPU node. FIFO (the reference order) places the early small job and leaves the big one
    # out; largestFirst
    # (dominant share: 6 CPU of 8 beats 1 GiB of 64) places the big one; a higher priority still
    # goes first whatever its size.
    c = cluster().node(node("a").cpu(8).memory(64))
    c.submit(
        gang("ml/small", pods=1).cpu(3).request("memory", 2**30).submitted_at(1),
        gang("ml/big", pods=2).cpu(3).submitted_at(2),
    )
    snap = c.snapshot()
    assert sorted(plan_round(snap, REFERENCE).placements) == ["ml/small-1"]
    largest = REFERENCE.with_args("PrioritySort", largestFirst=True)
    assert sorted(plan_round(snap, largest).placements) == ["ml/big-1", "ml/big-2"]
    c.submit(gang("ml/urgent", pods=1).cpu(2).priority(5).submitted_at(3))
    placed = sorted(plan_round(c.snapshot(), largest).placements)
    assert placed == ["ml/big-1", "ml/big-2", "ml/urgent-1"]


def test_same_input_same_output_as_json() -> None:
    c = cluster().node(*(node(f"n{i}").cpu(8) for i in range(6)))
    c.running(pod("low").cpu(8).priority(1).on("n0"))
    c.submit(gang("ml/a", pods=3).cpu(6).priority(5), gang("ml/b", pods=4).cpu(8).priority(9))
    snap = c.snapshot()
    first = json.dumps(plan_round(snap).to_dict(), sort_keys=True)
    assert first == json.dumps(plan_round(snap).to_dict(), sort_keys=True)
    data = json.loads(first)
    assert set(data) >= {"placements", "preemptions", "unschedulable", "decisions"}


def test_bound_pods_of_a_job_count_toward_its_gang() -> None:
    job, pods = gang("ml/g", pods=3, min_available=3).cpu(4).build()
    pods[0] = replace(pods[0], node="a", phase="Running")
    snap = replace(
        cluster().node(node("a").cpu(4), node("b").cpu(8)).snapshot(), pods=tuple(pods), jobs=(job,)
    )
    result = plan_round(snap, CORE)
    assert sorted(result.placements) == ["ml/g-2", "ml/g-3"]
    assert {p.node for p in result.placements.values()} == {"b"}


def test_pending_jobs_are_the_jobs_with_pods_to_place_in_job_order() -> None:
    c = cluster().node(node("a").cpu(64), node("b").cpu(64))
    c.running(pod("run-1").cpu(1).on("a"), pod("run-2").cpu(1).on("b"))
    c.running(pod("part-1").cpu(1).job("ml/part").on("a"))
    c.submit(
        gang("ml/g", pods=2).cpu(1),
        pod("lone").cpu(1),
        pod("part-2").cpu(1).job("ml/part"),
        gang("ml/h", pods=1).cpu(1),
    )
    state = CycleState(c.snapshot())

    def plain() -> list[str]:
        return [job.id for job in state.jobs.values() if state.pending_pods(job)]

    assert [job.id for job in state.pending_jobs()] == plain()
    assert {"ml/g", "ml/h", "default/lone"} <= set(plain())
    state.assume({"ml/h-1": 0, "ml/g-1": 1})  # ml/h has nothing left to place, ml/g one pod
    assert [job.id for job in state.pending_jobs()] == plain()
    assert "ml/h" not in plain() and "ml/g" in plain()


def test_pending_pods_are_the_pods_not_yet_assumed_whatever_moved_between() -> None:
    c = cluster().node(node("a").cpu(64), node("b").cpu(64))
    state = CycleState(
        c.submit(gang("ml/g", pods=4).cpu(1), gang("ml/h", pods=2).cpu(1)).snapshot()
    )
    job = state.jobs["ml/g"]

    def plain() -> list[str]:
        ordered = ["ml/g-1", "ml/g-2", "ml/g-3", "ml/g-4"]
        return [k for k in ordered if k not in state.assumed]

    def asked() -> list[str]:
        return [p.key for p in state.pending_pods(job)]

    assert asked() == plain()
    state.pending_pods(job).clear()  # the caller's own list: the next answer is whole
    assert asked() == plain()
    for move in (
        lambda: state.assume({"ml/g-2": 0}),
        lambda: state.assume({"ml/h-1": 1}),  # another job's pod: nothing of ml/g moves
        lambda: state.forget({"ml/g-2": 0}),
        lambda: state.assume({"ml/g-1": 1, "ml/g-4": 0}),
    ):
        move()
        assert asked() == plain()
        assert asked() == plain()


def _restarted_gang(policy: str, min_available: int, node_cpu: int) -> object:
    """A Strict gang `ml/g` of three 4-CPU pods, min-available `min_available`, whose first
    member runs on node a; the other two are pending (a restarted job's workers)."""
    job, pods = gang("ml/g", pods=3).cpu(4).build()
    info = GangInfo("ml/g", min_available, 3, match_policy=policy)  # type: ignore[arg-type]
    job = replace(job, gangs=(info,))
    running = replace(pods[0], node="a", phase="Running")
    c = cluster().node(node("a").cpu(node_cpu))
    return replace(c.snapshot(), pods=(running, *pods[1:]), jobs=(job,))


def test_match_policy_decides_whether_running_members_count() -> None:
    """core/gang.go isGangValidForPermit: only-waiting counts the members placed now (2 of 3:
    none placed), waiting-and-running counts the running one too (both placed)."""
    only = plan_round(_restarted_gang("only-waiting", 3, 16), CORE)  # type: ignore[arg-type]
    assert only.placements == {}
    assert "match-policy only-waiting" in only.unschedulable["ml/g"].reason
    both = plan_round(_restarted_gang("waiting-and-running", 3, 16), CORE)  # type: ignore[arg-type]
    assert sorted(both.placements) == ["ml/g-2", "ml/g-3"]


def test_once_satisfied_gang_places_its_members_one_by_one() -> None:
    """Room for one of the two restarted members: once satisfied, it starts alone, though the
    Strict gang then has 2 of min-available 3 (Koordinator lets it; only-waiting would not)."""
    result = plan_round(_restarted_gang("once-satisfied", 3, 8), CORE)  # type: ignore[arg-type]
    assert sorted(result.placements) == ["ml/g-2"]
    held = plan_round(_restarted_gang("waiting-and-running", 3, 8), CORE)  # type: ignore[arg-type]
    assert held.placements == {}
