"""Victim jobs, not victim pods: a preemptor pays once for a running job spanning several nodes.

Within the lowest priority band that makes room, the search prefers the nodes whose victims belong
to jobs already chosen (their other pods then come free), keeps back the victim jobs not needed
(a reprieve at job level), and ranks the candidate domains by victim jobs before planning the
first `candidateLimit` of them."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import numpy as np

from scheduler import plan_round
from scheduler.plugins.preemption_node_picks import _fewest_jobs
from tests.scheduler.builders import CORE, SPINE_BLOCK, cluster, gang, node, pod


def _spanning_cluster(block_of: dict[str, str] | None = None) -> cluster:
    """Six full 8-GPU nodes: n1-n3 each hold a job of their own; n4-n6 hold two jobs `wide-a` and
    `wide-b` of three 4-GPU pods each (one on each node). Every victim has priority 10."""
    c = cluster()
    if block_of is not None:
        c.topology(SPINE_BLOCK)
    for i in range(1, 7):
        n = node(f"n{i}").cpu(64).gpus(8)
        if block_of is not None:
            n.spine("s1").block(block_of[f"n{i}"])
        c.node(n)
    for i in range(1, 4):
        c.running(pod(f"single-{i}").cpu(8).gpu(8).priority(10).on(f"n{i}"))
    for wide in ("wide-a", "wide-b"):
        for i in range(4, 7):
            c.running(
                pod(f"{wide}-{i}").cpu(8).gpu(4).priority(10).job(f"default/{wide}").on(f"n{i}")
            )
    return c


def test_two_jobs_spanning_three_nodes_cost_less_than_three_single_jobs() -> None:
    snap = _spanning_cluster().submit(gang("default/big", pods=3).cpu(8).gpu(8).priority(1000))
    result = plan_round(snap.snapshot(), CORE)
    (record,) = result.preemptions
    assert sorted(record.victim_jobs) == ["default/wide-a", "default/wide-b"]
    assert sorted(record.nominations.values()) == ["n4", "n5", "n6"]
    assert record.cost["victim_jobs"] == 2


def test_the_domain_with_fewer_victim_jobs_is_planned_first_within_the_candidate_limit() -> None:
    blocks = {"n1": "b1", "n2": "b1", "n3": "b1", "n4": "b2", "n5": "b2", "n6": "b2"}
    snap = _spanning_cluster(blocks).submit(
        gang("default/big", pods=3).cpu(8).gpu(8).priority(1000).must_gather("BlockLayer")
    )
    # one domain planned: it must be the block whose victims are two jobs, not three
    profile = CORE.with_args("JobPreemption", candidateLimit=1)
    (record,) = plan_round(snap.snapshot(), profile).preemptions
    assert sorted(record.victim_jobs) == ["default/wide-a", "default/wide-b"]


def test_a_higher_band_is_not_entered_to_save_victim_jobs() -> None:
    c = _spanning_cluster()
    c.pods = [replace(p, priority=500) if p.name.startswith("wide-a") else p for p in c.pods]
    snap = c.submit(gang("default/big", pods=3).cpu(8).gpu(8).priority(1000)).snapshot()
    (record,) = plan_round(snap, CORE).preemptions
    # three jobs of priority 10 beat two jobs one of which has priority 500
    assert record.cost["highest_victim_priority"] == 10
    assert len(record.victim_jobs) == 3


def _fewest_by_brute_force(
    nodes: list[int], jobs_on: dict[int, set[int]], slot_of: dict[int, int], wanted: int
) -> int:
    every = sorted(set().union(*jobs_on.values()))
    for size in range(len(every) + 1):
        for chosen in itertools.combinations(every, size):
            gone = set(chosen)
            free = sum(slot_of[n] for n in nodes if jobs_on.get(n, set()) <= gone)
            if free >= wanted:
                return size
    raise AssertionError("the nodes hold too few slots")


def test_fewest_jobs_frees_enough_needs_every_job_it_keeps_and_is_near_the_fewest() -> None:
    rng = random.Random(7)
    extra = 0
    for _ in range(200):
        nodes = list(range(rng.randint(3, 9)))
        jobs = rng.randint(2, 8)
        jobs_on = {n: set(rng.sample(range(jobs), rng.randint(1, min(3, jobs)))) for n in nodes}
        slot_of = {n: rng.choice((1, 1, 2)) for n in nodes}
        wanted = rng.randint(1, sum(slot_of.values()))
        freed, (highest, count) = _fewest_jobs(nodes, jobs_on, slot_of, [10] * jobs, wanted)
        chosen = set().union(*(jobs_on[n] for n in freed.tolist())) if len(freed) else set()
        assert len(chosen) == count
        if chosen:
            assert highest == 10
        assert sum(slot_of[n] for n in freed.tolist()) >= wanted
        assert np.all(np.diff(freed) > 0)
        for j in chosen:  # the reprieve: no chosen job can be given back
            rest = chosen - {j}
            assert sum(slot_of[n] for n in nodes if jobs_on[n] <= rest) < wanted
        extra += count - _fewest_by_brute_force(nodes, jobs_on, slot_of, wanted)
    assert extra <= 20  # a greedy: within one job of the fewest in most of 200 cases
