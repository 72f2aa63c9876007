"""A domain's cheaper node sets to plan a preempting job on (`JobPreemption` plans there too).

The reference plan takes a domain's nodes by offer slots and name; the nodes whose victims cost
least are often elsewhere in the same domain. `node_picks` gives two such sets, remembered per
round: the fewest nodes taken cheapest victims first (`_cheapest_nodes`), and the nodes adding
the fewest new victim jobs within the lowest priority band that holds the pods
(`_fewest_new_victims`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.framework import IntArray
from scheduler.victims import VictimPool

NodePicks = tuple[IntArray | None, IntArray | None]
"""A domain's cheaper node sets to plan on: cheapest victims first, fewest new victim jobs."""


def node_picks(
    memo: dict[tuple[Any, ...], NodePicks],
    pool: VictimPool,
    usable: IntArray,
    pairs: IntArray,
    slots: IntArray,
    wanted: int,
) -> NodePicks:
    """`_cheapest_nodes` and `_fewest_new_victims` for a domain's `usable` nodes, remembered in
    `memo` (the round's `PreemptionBook.node_picks`) by all they read besides the round's victim
    `pool`: the nodes, their offer slots, their eligible (node, job) pairs and the pods wanted
    (searches of one shape ask again and again for domains where nothing moved). The arrays are
    the caller's to read, never to change.

    One node (often: a job that fits on a node) is both picks when it covers `wanted`, else
    neither: what both functions give, without their arithmetic."""
    if len(usable) == 1:
        only = usable if int(slots[usable[0]]) >= wanted else None
        return only, only
    key = (usable.tobytes(), slots[usable].tobytes(), pairs.tobytes(), wanted)
    picks = memo.get(key)
    if picks is None:
        picks = memo[key] = (
            _cheapest_nodes(pool, usable, pairs, slots, wanted),
            _fewest_new_victims(pool, usable, pairs, slots, wanted),
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
    """Nodes for `wanted` pods evicting the fewest jobs: within the lowest priority band that can
    hold them, repeatedly take the node whose victims add the fewest jobs not yet chosen (a job
    spanning several nodes is paid for once, which per-node costs cannot see). `usable_nodes`
    have offer slots; `pairs` are their eligible (node, job) pairs."""
    if not len(usable_nodes) or len(usable_nodes) > GREEDY_NODE_LIMIT:
        return None
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
    nothing: set[int] = set()
    for band in bands:
        remaining = [n for n in usable if top.get(n, band) <= band]
        if sum(slot_of[n] for n in remaining) < wanted:
            continue
        chosen: set[int] = set()
        picked: list[int] = []
        covered = 0
        while covered < wanted and remaining:
            best = min(
                remaining, key=lambda n: (len(jobs_on.get(n, nothing) - chosen), -slot_of[n], n)
            )
            remaining.remove(best)
            picked.append(best)
            chosen |= jobs_on.get(best, nothing)
            covered += slot_of[best]
        return np.array(sorted(picked), dtype=np.int64)
    return None
