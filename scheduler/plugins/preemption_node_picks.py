"""A domain's cheaper node sets to plan a preempting job on (`JobPreemption` plans there too).

The reference plan takes a domain's nodes by offer slots and name; the nodes whose victims cost
least are often elsewhere in the same domain. `node_picks` gives two such sets, remembered per
round: the fewest nodes taken cheapest victims first (`_cheapest_nodes`), and, within the lowest
priority band that holds the pods, the nodes freed by evicting few jobs (`_fewest_new_victims`:
a job spanning nodes is paid once, so the nodes whose victims belong to jobs already chosen come
first, then the jobs not needed are given back), with that set's victims as (highest priority,
jobs) to rank the domains by.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.framework import IntArray
from scheduler.victims import VictimPool

WITHOUT_VICTIMS = -(1 << 62)  # the highest victim priority of a set without victims

NodePicks = tuple[IntArray | None, IntArray | None]
"""A domain's cheaper node sets to plan on: cheapest victims first, fewest victim jobs."""
CostedPicks = tuple[IntArray | None, IntArray | None, tuple[int, int] | None]
"""`NodePicks` and the fewest-victim-jobs set's victims as (highest priority, jobs), to rank the
domains by (None: no such set)."""


def node_picks(
    memo: dict[tuple[Any, ...], CostedPicks],
    pool: VictimPool,
    usable: IntArray,
    pairs: IntArray,
    slots: IntArray,
    wanted: int,
) -> NodePicks:
    """`_cheapest_nodes` and `_fewest_new_victims` for a domain's `usable` nodes (see
    `costed_node_picks`)."""
    cheap, shared, _cost = costed_node_picks(memo, pool, usable, pairs, slots, wanted)
    return cheap, shared


def costed_node_picks(
    memo: dict[tuple[Any, ...], CostedPicks],
    pool: VictimPool,
    usable: IntArray,
    pairs: IntArray,
    slots: IntArray,
    wanted: int,
) -> CostedPicks:
    """`_cheapest_nodes` and `_fewest_new_victims` for a domain's `usable` nodes, with the
    latter's victims as (highest priority, jobs), remembered in `memo` (the round's
    `PreemptionBook.node_picks`) by all they read besides the round's victim `pool`: the nodes,
    their offer slots, their eligible (node, job) pairs and the pods wanted (searches of one
    shape ask again and again for domains where nothing moved). The arrays are the caller's to
    read, never to change.

    One node (often: a job that fits on a node) is both picks when it covers `wanted`, else
    neither: what both functions give, without their arithmetic."""
    if len(usable) == 1:
        if int(slots[usable[0]]) < wanted:
            return None, None, None
        jobs = set(pool.pair_job[pairs].tolist())
        top = max((pool.priorities[j] for j in jobs), default=WITHOUT_VICTIMS)
        return usable, usable, (top, len(jobs))
    key = (usable.tobytes(), slots[usable].tobytes(), pairs.tobytes(), wanted)
    picks = memo.get(key)
    if picks is None:
        picks = memo[key] = (
            _cheapest_nodes(pool, usable, pairs, slots, wanted),
            *_fewest_victim_jobs(pool, usable, pairs, slots, wanted),
        )
    return picks


def _node_victim_cost(pool: VictimPool, usable: IntArray, pairs: IntArray) -> IntArray:
    """Per node of sorted `usable`: (highest victim priority, victim jobs) of its eligible
    (node, job) `pairs` folded into one sortable number; 0 for a node with no victims (cheapest),
    growing with the priority, then the job count."""
    cost: IntArray = np.zeros(len(usable), dtype=np.int64)
    if not len(pairs):
        return cost
    where, jobs = pool.pair_node[pairs], pool.pair_job[pairs]
    starts = np.flatnonzero(np.concatenate(([True], where[1:] != where[:-1])))
    top = np.maximum.reduceat(pool.priority_rank[jobs], starts)
    counts = np.diff(np.append(starts, len(where)))
    cost[np.searchsorted(usable, where[starts])] = top * (len(pool.jobs) + 1) + counts
    return cost


def _cheapest_nodes(
    pool: VictimPool, usable: IntArray, pairs: IntArray, slots: IntArray, wanted: int
) -> IntArray | None:
    """The fewest of `usable` (nodes with offer slots), cheapest victims first, whose offer slots
    cover `wanted` pods; `pairs` are their eligible (node, job) pairs."""
    if not len(usable):
        return None
    order = usable[np.lexsort((usable, _node_victim_cost(pool, usable, pairs)))]
    covered = np.cumsum(slots[order])
    enough = int(np.searchsorted(covered, wanted)) + 1
    if enough > len(order):
        return None
    return np.sort(order[:enough])


# Past this many candidate nodes in a domain the greedy below costs more than it saves.
GREEDY_NODE_LIMIT = 128


def _fewest_new_victims(
    pool: VictimPool, usable_nodes: IntArray, pairs: IntArray, slots: IntArray, wanted: int
) -> IntArray | None:
    """Nodes for `wanted` pods evicting few jobs, within the lowest priority band that can hold
    them (see `_fewest_jobs`). `usable_nodes` have offer slots; `pairs` are their eligible
    (node, job) pairs."""
    return _fewest_victim_jobs(pool, usable_nodes, pairs, slots, wanted)[0]


def _fewest_victim_jobs(
    pool: VictimPool, usable_nodes: IntArray, pairs: IntArray, slots: IntArray, wanted: int
) -> tuple[IntArray | None, tuple[int, int] | None]:
    """`_fewest_new_victims`, with its victims as (highest priority, jobs)."""
    if not len(usable_nodes) or len(usable_nodes) > GREEDY_NODE_LIMIT:
        return None, None
    usable = usable_nodes.tolist()
    slot_of = dict(zip(usable, slots[usable_nodes].tolist(), strict=True))
    jobs_on: dict[int, set[int]] = {}
    for n, j in zip(pool.pair_node[pairs].tolist(), pool.pair_job[pairs].tolist(), strict=True):
        on = jobs_on.get(n)
        if on is None:
            jobs_on[n] = {j}
        else:
            on.add(j)
    priorities = pool.priorities
    top = {n: max(priorities[j] for j in jobs) for n, jobs in jobs_on.items()}
    bands = sorted(set(top.values()) | {min(top.values(), default=0)})
    for band in bands:
        remaining = [n for n in usable if top.get(n, band) <= band]
        if sum(slot_of[n] for n in remaining) >= wanted:
            return _fewest_jobs(remaining, jobs_on, slot_of, priorities, wanted)
    return None, None


def _fewest_jobs(
    nodes: list[int],
    jobs_on: dict[int, set[int]],
    slot_of: dict[int, int],
    priorities: list[int],
    wanted: int,
) -> tuple[IntArray, tuple[int, int]]:
    """Victim jobs among `nodes` whose eviction frees nodes (every job on them gone) with offer
    slots for `wanted` pods, few of them, and those nodes (the `nodes` hold enough slots).

    A job spanning several nodes is paid for once, and evicting it helps every node it holds:
    so each step evicts the jobs of the node that frees the most wanted slots per new victim job,
    counting every node those jobs complete (a weighted set-cover greedy). Then a reprieve at
    job level (kube-scheduler keeps back the victims not needed, one by one, highest priority
    first): a chosen job whose nodes are not needed for `wanted` any more is given back."""
    missing = {n: len(jobs_on.get(n, ())) for n in nodes}
    holding: dict[int, list[int]] = {}  # job -> its nodes among `nodes`
    for n in nodes:
        for j in jobs_on.get(n, ()):
            holding.setdefault(j, []).append(n)
    covered = sum(slot_of[n] for n in nodes if not missing[n])
    chosen: set[int] = set()
    while covered < wanted:
        need = wanted - covered
        best: tuple[float, int, int, int] | None = None
        best_new: set[int] = set()
        for n in nodes:
            if not missing[n]:
                continue
            new = jobs_on[n] - chosen
            hits: dict[int, int] = {}
            for j in new:
                for m in holding[j]:
                    hits[m] = hits.get(m, 0) + 1
            gain = sum(slot_of[m] for m, h in hits.items() if h == missing[m])
            key = (len(new) / min(gain, need), len(new), -gain, n)
            if best is None or key < best:
                best, best_new = key, new
        if best is None:  # cannot happen: `nodes` hold enough slots
            break
        for j in best_new:
            for m in holding[j]:
                missing[m] -= 1
                if not missing[m]:
                    covered += slot_of[m]
        chosen |= best_new

    # the reprieve: highest priority first, then the job freeing the fewest slots
    def freeing(j: int) -> int:
        return sum(slot_of[m] for m in holding[j] if not missing[m])

    for j in sorted(chosen, key=lambda j: (-priorities[j], freeing(j), j)):
        lost = freeing(j)
        if covered - lost >= wanted:
            chosen.discard(j)
            covered -= lost
            for m in holding[j]:
                missing[m] += 1
    freed = np.array(sorted(n for n in nodes if not missing[n]), dtype=np.int64)
    return freed, (max((priorities[j] for j in chosen), default=WITHOUT_VICTIMS), len(chosen))
