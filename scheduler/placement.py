"""The reference placement algorithm of koordinator.md ("Placement algorithm"), on arrays.

Given per-node offer slots for a job, sum them up the topology, pick the candidate domain and
distribute the job's pods inside it:

1-2. offer slots per node (computed by the Filter plugins) summed into every domain (`np.bincount`);
3.   with a MustGather layer only that layer's domains may hold the job, else search from the root;
4.   walk down and keep the deepest level with a domain covering the desired slots;
5.   among its covering domains take the fewest slots (binpack), then the better score, then name;
6.   inside it order nodes by their ancestors' slots (most first), score, name, then own slots;
     each node takes min(its slots, what remains);
7.   the caller assigns pods in placement order to that node order.

Options (our extensions, all off here; the NetworkTopology plugin turns `best_fit` and
`pack_parents` on by default): `parent_fragmentation` breaks slot ties by the
parent domain's slots (fewest first, so the job lands where its parent is already fragmented
and whole parents stay free); `prefer_gather_score` treats PreferGather layers as a score (a
candidate inside one domain of a PreferGather layer earns a point; all covering levels compete, and
at equal slots the shallower, already fragmented domain wins) instead of a strict walk.
`best_fit` reverses step 6 (fewest slots first); `pack_parents` orders the nodes by every level
of the tree even for a job without a rule (whose only levels are the root and the nodes).
`podCountMultiple` is applied
by the caller by flooring node slots to a multiple of N before calling here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.framework import FloatArray, IntArray
from scheduler.model import TopologyRule
from scheduler.topology import TopologyTree

NO_CANDIDATE = "no candidate topology nodes can accommodate job"
MESSAGE_DOMAIN_LIMIT = 12  # domains spelled out in the message; details always hold them all


@dataclass(frozen=True)
class PlacementOptions:
    parent_fragmentation: bool = False
    prefer_gather_score: bool = False
    best_fit: bool = False  # inside the chosen domain: fewest offer slots first (step 6 reversed)
    pack_parents: bool = False  # order nodes by every tree level, even for jobs without a rule


@dataclass
class NodeScores:
    """Per-node scores and their sums per topology level; each level is summed once, however
    many placements (a preemption search tries several) ask.

    Given `counting` instead of `per_node`, the scores are counted when a placement first reads
    them: a placement that fails never does (it reads only offer slots). The caller must not
    change the state the scores read before the placements that use them are done."""

    tree: TopologyTree
    per_node: FloatArray | None = None
    counting: Callable[[], FloatArray] | None = None
    _levels: dict[int, FloatArray] = field(default_factory=dict)

    def at(self, level: int) -> FloatArray:
        summed = self._levels.get(level)
        if summed is None:
            if self.per_node is None:
                assert self.counting is not None, "NodeScores needs per_node or counting"
                self.per_node = self.counting()
            summed = self._levels[level] = _score_sums(self.tree, level, self.per_node)
        return summed


@dataclass(frozen=True)
class PlacementOutcome:
    """Node take counts on success (`counts`, in distribution order), or a failure message."""

    node_order: IntArray | None
    counts: IntArray | None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    decision: dict[str, Any] = field(default_factory=dict)
    topology_decided: bool = False
    candidates: tuple[tuple[int, int], ...] = ()

    @property
    def ok(self) -> bool:
        return self.node_order is not None


def must_gather_level(tree: TopologyTree, rule: TopologyRule | None) -> int:
    """The level of the deepest MustGather layer (0, the root, when there is none)."""
    start = 0
    for gather in rule.gather if rule else ():
        pos = tree.layer_position(gather.layer)
        if gather.strategy == "MustGather" and pos is not None:
            start = max(start, pos)
    return start


def place(
    tree: TopologyTree,
    slots: IntArray,
    desired: int,
    rule: TopologyRule | None,
    scores: NodeScores | None = None,
    options: PlacementOptions | None = None,
    among: IntArray | None = None,
) -> PlacementOutcome:
    """Choose a domain and per-node pod counts; `slots` must already exclude ineligible nodes.
    With `among`, the only nodes whose slots may be non-zero (a preemption attempt's few),
    domains are summed and nodes searched over those alone; the outcome is the one without."""
    options = options or PlacementOptions()
    topological = bool(rule and rule.gather)
    depth = len(tree.levels)
    # Jobs without a topology rule use every node: the root and the nodes are their only levels.
    levels = list(range(depth)) if topological else [0, depth - 1]
    if topological and tree.has_outside:
        slots = np.where(tree.outside, 0, slots)
    offer = _Offer(tree, slots, among, topological, desired)
    start = must_gather_level(tree, rule) if topological else 0
    if not offer.covers(start):
        return _failure(tree, start, offer.sums(start), desired, slots)
    searched = [lv for lv in levels if lv >= start]
    domain_scores = _LevelScores(scores)
    if options.prefer_gather_score and topological:
        prefer = [tree.layer_position(g.layer) or 0 for g in (rule.gather if rule else ())]
        bonus = {lv: sum(1 for p in prefer if p <= lv) for lv in searched}
        candidate_levels = [lv for lv in searched if offer.covers(lv)]
    else:
        bonus = {}
        # the deepest covering level: `start` covers, so the walk up from the nodes ends there
        deepest = next(lv for lv in reversed(searched) if offer.covers(lv))
        candidate_levels = [deepest]
    ranked: list[tuple[tuple[Any, ...], int, IntArray]] = []
    for lv in candidate_levels:
        cand, best_key = _rank(tree, lv, offer, domain_scores.at(lv), levels, options)
        first = best_key[0]
        own, parent, neg_score, index = first
        # across levels, equal slots go to the shallower (already fragmented) domain
        ranked.append(((-bonus.get(lv, 0), own, parent, neg_score, lv, index), lv, cand))
    _key, level, ordered_candidates = min(ranked, key=lambda r: r[0])
    domain = int(ordered_candidates[0])
    members = offer.members(level, domain)
    sort_keys: list[Any] = []  # primary first; np.lexsort wants it last
    for lv in range(depth) if options.pack_parents else levels:
        if lv <= level:
            continue
        dom = tree.node_domain_at(lv)[members]
        level_sums = offer.sums(lv)[dom]
        sort_keys.append(level_sums if options.best_fit else -level_sums)
        level_scores = domain_scores.at(lv)
        if level_scores is not None:
            sort_keys.append(-level_scores[dom])
        sort_keys.append(dom)
    order = members[np.lexsort(tuple(reversed(sort_keys)))] if sort_keys else members
    ordered_slots = slots[order]
    before = np.cumsum(ordered_slots) - ordered_slots
    counts = np.minimum(np.maximum(desired - before, 0), ordered_slots)
    used = counts > 0
    shown = ordered_candidates[:MESSAGE_DOMAIN_LIMIT]
    labels, shown_slots = tree.domain_labels(level), offer.sums(level)[shown].tolist()
    alternatives = {labels[d]: n for d, n in zip(shown.tolist(), shown_slots, strict=True)}
    decision = {
        "chosen_domain": labels[domain],
        "chosen_offer_slots": shown_slots[0],  # the chosen domain is the first shown
        "desired_offer_slots": desired,
        "alternatives": alternatives,
    }
    shortlist = tuple((level, d) for d in shown.tolist())
    return PlacementOutcome(order[used], counts[used], decision=decision, candidates=shortlist)


class _Offer:
    """A placement's offer slots per level: summed into the level's domains and the domains
    covering the job, each counted when the walk first reads it. With `among` (the only nodes
    whose slots may be non-zero) the nodes are read over those alone."""

    __slots__ = ("_cover", "_sums", "among", "desired", "offered", "slots", "topological", "tree")

    def __init__(
        self,
        tree: TopologyTree,
        slots: IntArray,
        among: IntArray | None,
        topological: bool,
        desired: int,
    ) -> None:
        self.tree, self.slots, self.among = tree, slots, among
        self.offered: IntArray | None = slots[among] if among is not None else None
        self.topological, self.desired = topological, desired
        self._sums: dict[int, IntArray] = {}
        self._cover: dict[int, IntArray] = {}

    def sums(self, level: int) -> IntArray:
        """Offer slots per domain of `level` (the nodes' level: the slots themselves)."""
        found = self._sums.get(level)
        if found is None:
            found = self._sums[level] = _sums(
                self.tree, level, self.slots, self.topological, self.among
            )
        return found

    def covering(self, level: int) -> IntArray:
        """The domains of `level` offering at least the desired slots."""
        found = self._cover.get(level)
        if found is None:
            among, offered = self.among, self.offered
            if level == len(self.tree.levels) - 1 and among is not None and offered is not None:
                found = among[offered >= self.desired]  # ranked by node index later: any order
            else:
                found = np.flatnonzero(self.sums(level) >= self.desired).astype(np.int64)
            self._cover[level] = found
        return found

    def covers(self, level: int) -> bool:
        return len(self.covering(level)) > 0

    def members(self, level: int, domain: int) -> IntArray:
        """The nodes with slots in one domain of `level` (the walk orders them, by node index
        last)."""
        if self.among is None or self.offered is None:
            spanned = domain_nodes(self.tree, level, domain, self.topological, len(self.slots))
            kept: IntArray = spanned[self.slots[spanned] > 0]
            return kept
        inside = self.offered > 0
        if level > 0:  # the root holds every node with slots (those outside the tree have none)
            inside &= self.tree.node_domain_at(level)[self.among] == domain
        found: IntArray = self.among[inside]
        return found


class _LevelScores:
    """A placement's view of `NodeScores`: a level's sums only when the walk reads them."""

    __slots__ = ("scores",)

    def __init__(self, scores: NodeScores | None) -> None:
        self.scores = scores

    def at(self, level: int) -> FloatArray | None:
        return self.scores.at(level) if self.scores is not None else None


def domain_nodes(
    tree: TopologyTree, level: int, domain: int, topological: bool, n: int
) -> IntArray:
    """Nodes a candidate domain spans (for jobs without a rule the root spans every node)."""
    if level == 0 and not topological:
        return np.arange(n, dtype=np.int64)
    return tree.nodes_in(level, domain)


def _rank(
    tree: TopologyTree,
    level: int,
    offer: _Offer,
    scores: FloatArray | None,
    levels: list[int],
    options: PlacementOptions,
) -> tuple[IntArray, list[tuple[int, int, float, int]]]:
    """Covering domains of one level, best first: fewest slots, parent slots, score, name."""
    cand = offer.covering(level)
    own = offer.sums(level)[cand]
    parent = np.zeros(len(cand), dtype=np.int64)
    if options.parent_fragmentation and level > 0:
        parent_level = max(lv for lv in levels if lv < level)
        if parent_level == 0:
            parent[:] = offer.sums(0)[0]
        else:
            ups = _parent_index(tree, level, parent_level)[cand]
            parent = offer.sums(parent_level)[ups]
    score = scores[cand] if scores is not None else np.zeros(len(cand))
    order = np.lexsort((cand, -score, parent, own))
    cand = cand[order]
    first = int(order[0])
    keys = [(int(own[first]), int(parent[first]), -float(score[first]), int(cand[0]))]
    return cand, keys


def _parent_index(tree: TopologyTree, level: int, parent_level: int) -> IntArray:
    """For each domain of `level`, the index of its ancestor at `parent_level`."""
    if level == len(tree.levels) - 1:
        return tree.node_domain_at(parent_level)
    idx = tree.domain_parent[level - 1]
    walk = level - 1
    while walk > parent_level:
        idx = tree.domain_parent[walk - 1][idx]
        walk -= 1
    return idx


def _sums(
    tree: TopologyTree, level: int, slots: IntArray, topological: bool, among: IntArray | None
) -> IntArray:
    if among is not None and level < len(tree.levels) - 1:
        return tree.domain_sums_among(level, slots, among)
    if not topological and level == 0:
        return np.array([int(slots.sum())], dtype=np.int64)
    return tree.domain_sums(level, slots)


def _score_sums(tree: TopologyTree, level: int, scores: FloatArray) -> FloatArray:
    if level == 0:
        return np.array([float(scores.sum())])
    if level == len(tree.levels) - 1:
        return scores
    arr = tree.node_domain_at(level)
    inside = arr >= 0
    sums: FloatArray = np.bincount(
        arr[inside], weights=scores[inside], minlength=len(tree.domain_names[level - 1])
    ).astype(np.float64)
    return sums


def _failure(
    tree: TopologyTree, level: int, sums: IntArray, desired: int, slots: IntArray
) -> PlacementOutcome:
    details: dict[str, Any] = {"desired_offer_slots": desired}
    if level == 0:
        details["offer_slots"] = int(slots.sum())
        return PlacementOutcome(None, None, "", details)
    domain_slots = dict(zip(tree.domain_labels(level), sums.tolist(), strict=True))
    details["domain_offer_slots"] = domain_slots
    details["gather_layer"] = tree.levels[level]  # the layer whose one domain must hold the job
    shown = "; ".join(f"{k}: {v}" for k, v in list(domain_slots.items())[:MESSAGE_DOMAIN_LIMIT])
    if len(domain_slots) > MESSAGE_DOMAIN_LIMIT:
        shown += f"; ... ({len(domain_slots) - MESSAGE_DOMAIN_LIMIT} more)"
    message = f"{NO_CANDIDATE}, desiredOfferSlot: {desired}, topology topologyNode {shown}"
    return PlacementOutcome(None, None, message, details, topology_decided=True)
