"""A preemption search's per-round book, and its plans' victims and costs.

`PreemptionBook` is what one round's searches share: the victim pool, the budgets, the jobs
already evicted and what earlier searches found. For one plan (`JobPreemption._victims_for`), the
victims are kept back highest priority first, budget-breaking ones first (`reprieve_order`),
while every slot-limit check of the plan's nodes still holds (`reprieve`; with the job's quota
need, `reprieve_for_quota`); `costed_plan` costs what is left: (budget violations, highest victim
priority, victim jobs, resources, rank). A plan sure to cost more than the best so far stops early
(`loses`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.framework import BoolArray, IntArray, NodeCheck, Plan, Status
from scheduler.plugins.preemption_node_picks import WITHOUT_VICTIMS, CostedPicks
from scheduler.state import CycleState
from scheduler.victims import BudgetBook, VictimJob, VictimPool


@dataclass
class PreemptionBook:
    """Per-round preemption memory: the victim pool, budgets, and jobs already evicted."""

    pool: VictimPool
    budgets: BudgetBook
    evicted_mask: BoolArray  # victim jobs already chosen this round
    # Within a round free capacity only shrinks and victims only leave, so a search that found
    # nothing for (shape, rule, mode) at priority p and n pods finds nothing for a later job of
    # that shape at priority <= p with >= n pods: remember (p, n, status) to skip repeats.
    hopeless: dict[tuple[Any, ...], list[tuple[int, int, Status]]] = field(default_factory=dict)
    # The lowest victim priority band that made room for a job of a shape (see
    # `JobPreemption._search`), as (pods, band priority): for the same reason a later job of
    # that shape with at least as many pods needs at least that band.
    band_floors: dict[tuple[Any, ...], list[tuple[int, int]]] = field(default_factory=dict)
    # The victims of a plan (see `JobPreemption._victims_for`) by what they depend on.
    # (None: the plan does not hold even with every candidate gone; else the victims and whether
    # they are all of them, or only the first ones, found before the plan was sure to lose.)
    reprieved: dict[tuple[Any, ...], tuple[tuple[VictimJob, ...], bool] | None] = field(
        default_factory=dict
    )
    # A domain's cheaper node sets by what they depend on (see `preemption_node_picks`).
    node_picks: dict[tuple[Any, ...], CostedPicks] = field(default_factory=dict)
    totals: dict[str, int] | None = None  # see `_totals`


@dataclass(frozen=True)
class VictimPlan:
    """One plan with its victims, the budgets they break, its cost key and reported cost."""

    plan: Plan
    victims: tuple[VictimJob, ...]
    violations: Mapping[str, int]
    key: tuple[Any, ...]  # (budget violations, highest victim priority, jobs, resources, rank)
    cost: Mapping[str, Any]


def reprieve_order(book: PreemptionBook, chosen: IntArray) -> IntArray:
    """The victims (pool indices) in the order they are kept back: those whose eviction would
    break a budget first, then the highest priority, then by id."""
    rank = book.pool.reprieve_rank[chosen]
    if not book.budgets.pdbs:
        ordered: IntArray = chosen[np.argsort(rank)]
        return ordered
    pool = book.pool
    keeps_budgets = [not book.budgets.violations(pool.jobs[int(i)].pods) for i in chosen]
    ordered = chosen[np.lexsort((rank, np.array(keeps_budgets, dtype=np.bool_)))]
    return ordered


def reprieve(
    consider: Sequence[VictimJob],
    checks: Mapping[int, Sequence[NodeCheck]],
    beat: tuple[Any, ...] | None,
) -> tuple[list[VictimJob], bool]:
    """The victims among `consider` (in reprieve order): each is kept back when every check of
    the nodes it holds pods on still holds with its pods there. With whether that is all of
    them: the search stops (False) once the plan is sure to lose to the plan keyed `beat` (see
    `loses`)."""
    victims: list[VictimJob] = []
    for v in consider:
        fits = True
        for n, ids in v.holders.items():
            node_checks = checks.get(n)
            if node_checks is None:
                continue
            for c in node_checks:
                if not c.holds_keeping(ids):
                    fits = False
                    break
            if not fits:
                break
        if fits:
            for n, ids in v.holders.items():
                for c in checks.get(n, ()):
                    c.keep(ids)
            continue
        victims.append(v)
        if beat is not None and loses(victims, beat):
            return victims, False
    return victims, True


def reprieve_for_quota(
    consider: Sequence[VictimJob],
    checks: Mapping[int, Sequence[NodeCheck]],
    quota_need: Mapping[str, int],
    beat: tuple[Any, ...] | None,
) -> list[VictimJob] | None:
    """`reprieve` when the job's own quota must also free `quota_need`: a victim is kept back
    only while the rest still free enough of it."""
    quota_room = {r: sum(_amount(v, r) for v in consider) for r in quota_need}
    if any(quota_room[r] < amount for r, amount in quota_need.items()):
        return None
    victims: list[VictimJob] = []
    for v in consider:
        back = [(checks[n], ids) for n, ids in v.holders.items() if n in checks]
        fits = all(quota_room[r] - _amount(v, r) >= a for r, a in quota_need.items())
        fits = fits and all(c.holds_keeping(ids) for cs, ids in back for c in cs)
        if fits:
            for cs, ids in back:
                for c in cs:
                    c.keep(ids)
            for r in quota_need:
                quota_room[r] -= _amount(v, r)
        else:
            victims.append(v)
            if beat is not None and loses(victims, beat):
                return None
    return victims


def _amount(v: VictimJob, resource: str) -> int:
    return sum(int(p.requests.get(resource, 0)) for p in v.pods)


def loses(victims: Sequence[VictimJob], beat: tuple[Any, ...]) -> bool:
    """Whether a plan whose victims so far (highest priority first) are `victims` is sure to cost
    more than the plan keyed `beat` (no budget violations on either side)."""
    highest, count = victims[0].priority, len(victims)
    best_highest, best_count = int(beat[1]), int(beat[2])
    return highest > best_highest or (highest == best_highest and count > best_count)


def costed_plan(
    state: CycleState,
    plan: Plan,
    victims: Sequence[VictimJob],
    book: PreemptionBook,
    rank: int,
) -> VictimPlan:
    """The plan with its victims and its cost: the key plans are compared by, and what the
    decision reports."""
    victims = sorted(victims, key=lambda v: v.id)
    victim_pods = sum(len(v.pods) for v in victims)
    violations = (
        book.budgets.violations([p for v in victims for p in v.pods]) if book.budgets.pdbs else {}
    )
    resources: dict[str, int] = {}
    pool = book.pool
    index = pool.index
    for v in victims:
        for r, amount in pool.requests(index[v.id]).items():
            resources[r] = resources.get(r, 0) + amount
    totals = _totals(state, book)
    weight = sum(amount / totals[r] for r, amount in resources.items())
    highest = max((v.priority for v in victims), default=None)
    key = (
        sum(violations.values()),
        highest if highest is not None else WITHOUT_VICTIMS,
        len(victims),
        weight,
        rank,
    )
    cost = {
        "highest_victim_priority": highest,
        "victim_jobs": len(victims),
        "victim_pods": victim_pods,
        "resources": resources,
        "pdb_violations": violations,
    }
    return VictimPlan(plan, tuple(victims), violations, key, cost)


def _totals(state: CycleState, book: PreemptionBook) -> dict[str, int]:
    """Per resource, the cluster's allocatable (at least 1), as `costed_plan` divides by it (read
    once a round: the nodes are fixed)."""
    if book.totals is None:
        summed = state.totals().tolist()
        book.totals = {r: max(1, int(summed[i])) for r, i in state.resource_index.items()}
    return book.totals
