"""JobPreemption plugin. Extension point: PostFilter.

For a job that did not fit (koordinator.md, "Job-level preemption", with our differences):
1. skip when the job waits for victims chosen earlier that still terminate on its nominated nodes;
2. possible victims are whole running jobs of strictly lower priority without a protection label
   (in-quota preemption, when quota admission failed: only jobs of the same quota; reclaim, when the
   job's quota is within its min: also jobs of quotas using more than their runtime quota);
3. dry run with every possible victim removed: the whole job must fit, topology included, else
   "preemption not helpful";
4. for the best few candidate domains of that dry run, plan the job inside the domain (and on
   the domain's nodes whose victims cost least), keep back victims highest priority first
   (budget-breaking ones first) while every slot-limit Filter's `node_checks` (resources, cards)
   still holds on the plan's nodes, and cost the plan: (budget violations, highest victim
   priority, victim jobs, resources, rank);
5. the cheapest plan evicts its victims and nominates the job's pods to their planned nodes; a plan
   that must break a PodDisruptionBudget is reported as blocked instead.
When preemption is not allowed (`preemptionPolicy: Never`) the same search yields the counterfactual
("would fit if these jobs were evicted"). Arguments: `candidateLimit` (default 6), `counterfactuals`
(default true).

A decision names its rule (`PostFilterResult.rule`): `InQuota` (the job's quota was short: jobs of
the same quota at lower priority), `QuotaReclaim` (some victim is not of lower priority: it is
borrowing beyond its runtime quota while the job's quota is within its min) or `LowerPriority`.
The dry runs go through the framework's `Handle`, the quota ledger too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from scheduler.framework import (
    Arg,
    BoolArray,
    Code,
    Failure,
    Handle,
    IntArray,
    NodeCheck,
    Plan,
    PostFilterResult,
    Status,
)
from scheduler.model import JobInfo, PodInfo
from scheduler.placement import domain_nodes
from scheduler.state import CycleState
from scheduler.victims import BudgetBook, VictimJob, VictimPool, overused_quotas

NO_VICTIMS = "no potential victims"
NOT_HELPFUL = "preemption not helpful"
NO_HELP = "PreemptionNotHelpful"  # cause codes of the answers (`Status.cause`)
NEVER = "PreemptionNever"
RULE_LOWER_PRIORITY = "LowerPriority"
RULE_IN_QUOTA = "InQuota"
RULE_QUOTA_RECLAIM = "QuotaReclaim"


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
    # The victims of a plan (see `JobPreemption._victims_for`) by what they depend on.
    # (None: the plan does not hold even with every candidate gone; else the victims and whether
    # they are all of them, or only the first ones, found before the plan was sure to lose.)
    reprieved: dict[tuple[Any, ...], tuple[tuple[VictimJob, ...], bool] | None] = field(
        default_factory=dict
    )
    # A domain's cheaper node sets by what they depend on (see `_node_picks`).
    node_picks: dict[tuple[Any, ...], NodePicks] = field(default_factory=dict)
    totals: dict[str, int] | None = None  # see `_totals`


@dataclass(frozen=True)
class VictimPlan:
    plan: Plan
    victims: tuple[VictimJob, ...]
    violations: Mapping[str, int]
    key: tuple[Any, ...]  # (budget violations, highest victim priority, jobs, resources, rank)
    cost: Mapping[str, Any]


class JobPreemption:
    name = "JobPreemption"
    extension_points = frozenset({"PostFilter"})
    arguments: ClassVar[Mapping[str, Arg]] = {
        "candidateLimit": Arg("int", minimum=1, maximum=64),
        "counterfactuals": Arg("bool"),
    }

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        args = dict(args)
        self.handle = handle
        self.candidate_limit = int(args.get("candidateLimit", 6))
        self.counterfactuals = bool(args.get("counterfactuals", True))

    def book(self, state: CycleState) -> PreemptionBook:
        book = state.plugin_data.get(self.name)
        if not isinstance(book, PreemptionBook):
            pool = VictimPool(state)
            book = PreemptionBook(
                pool,
                BudgetBook(state.snapshot.pdbs, state.snapshot.pods),
                np.zeros(len(pool.jobs), dtype=np.bool_),
            )
            state.plugin_data[self.name] = book
        return book

    def post_filter(self, state: CycleState, job: JobInfo, failure: Failure) -> PostFilterResult:
        pods = state.pending_pods(job)
        waiting = _terminating_on_nominated(state, pods)
        if waiting:
            reason = f"waiting for preemption victims to terminate on {', '.join(waiting)}"
            return PostFilterResult(Status(Code.WAIT, reason, {}, self.name, "VictimsTerminating"))
        allowed = job.preemption_policy != "Never" and all(
            p.preemption_policy != "Never" for p in pods
        )
        if not allowed and not self.counterfactuals:
            status = Status(Code.UNRESOLVABLE, "preemptionPolicy is Never", {}, self.name, NEVER)
            return PostFilterResult(status)
        quota_need = _quota_need(failure)
        found = self.search(state, job, pods, quota_need)
        if isinstance(found, Status):
            if quota_need:
                shortfall = failure.status.details.get("quota_shortfall", {})
                details = {"counterfactual": {"quota_increase": shortfall}}
                status = Status(found.code, found.reason, details, self.name, found.cause)
                return PostFilterResult(status)
            return PostFilterResult(found)
        if not found.victims:
            reason = f"{NOT_HELPFUL}: it would not make room for what blocks the job"
            return PostFilterResult(Status(Code.UNRESOLVABLE, reason, {}, self.name, NO_HELP))
        counterfactual = {
            "evict_jobs": [v.id for v in found.victims],
            "fits_in": found.plan.decision.get("chosen_domain", ""),
            "cost": dict(found.cost),
        }
        if not allowed:
            reason = "preemption not allowed (preemptionPolicy: Never)"
            details = {"counterfactual": counterfactual}
            status = Status(Code.UNRESOLVABLE, reason, details, self.name, NEVER)
            return PostFilterResult(status)
        if found.violations:
            names = ", ".join(sorted(found.violations))
            status = Status(
                Code.UNRESOLVABLE,
                f"preemption blocked by PodDisruptionBudget {names}",
                {"counterfactual": counterfactual},
                self.name,
                "BlockedByDisruptionBudget",
            )
            return PostFilterResult(status)
        return self._commit(state, job, found, bool(quota_need))

    def _commit(
        self, state: CycleState, job: JobInfo, found: VictimPlan, in_quota: bool
    ) -> PostFilterResult:
        book = self.book(state)
        victim_pods = [p for v in found.victims for p in v.pods]
        for v in found.victims:
            book.evicted_mask[book.pool.index[v.id]] = True
        book.budgets.spend(victim_pods)
        state.evicting.update(p.key for p in victim_pods)
        nominations = {k: state.node_names[i] for k, i in sorted(found.plan.assignment.items())}
        return PostFilterResult(
            Status(Code.SUCCESS, "preempting", {}, self.name, "Preempting"),
            victim_job_ids=tuple(v.id for v in found.victims),
            victim_pod_keys=tuple(sorted(p.key for p in victim_pods)),
            nominations=nominations,
            cost=found.cost,
            rule=_rule(job, found.victims, in_quota),
        )

    # --- the search ---------------------------------------------------------------------------
    def eligible(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], in_quota: bool
    ) -> BoolArray:
        book = self.book(state)
        pool = book.pool
        mask: BoolArray = (pool.priority < job.priority) & ~pool.protected & ~book.evicted_mask
        quota = job.quota or (pods[0].quota if pods else None)
        if in_quota:
            same = np.array([v.quotas == frozenset({quota}) for v in pool.jobs], dtype=np.bool_)
            return mask & same
        overused = overused_quotas(self.handle.runtime_quota(state), quota, pods)
        if overused:
            borrowers = np.array(
                [bool(v.quotas) and v.quotas <= overused for v in pool.jobs], dtype=np.bool_
            )
            mask |= borrowers & ~pool.protected & ~book.evicted_mask
        return mask

    def search(
        self,
        state: CycleState,
        job: JobInfo,
        pods: Sequence[PodInfo],
        quota_need: Mapping[str, int],
    ) -> VictimPlan | Status:
        book = self.book(state)
        shape = _shape_key(state, job, pods, bool(quota_need))
        for priority, count, status in book.hopeless.get(shape, []) if shape else []:
            if job.priority <= priority and len(pods) >= count:
                return status
        found = self._search(state, book, job, pods, quota_need)
        if isinstance(found, Status) and shape is not None:
            book.hopeless.setdefault(shape, []).append((job.priority, len(pods), found))
        return found

    def _search(
        self,
        state: CycleState,
        book: PreemptionBook,
        job: JobInfo,
        pods: Sequence[PodInfo],
        quota_need: Mapping[str, int],
    ) -> VictimPlan | Status:
        eligible = self.eligible(state, job, pods, bool(quota_need))
        if not eligible.any():
            return Status(Code.UNRESOLVABLE, NO_VICTIMS, {}, self.name, "NoVictims")
        pool, framework = book.pool, self.handle
        with state.releasing(*pool.release(state, np.flatnonzero(eligible))):
            slots = framework.offer_slots(state, job, pods)
            scores = framework.node_scores(state, job)
            dry = framework.try_place(state, job, pods, slots=slots, scores=scores)
            if isinstance(dry, Failure):
                reason = f"{NOT_HELPFUL}: {dry.status.reason}"
                details = dict(dry.status.details)
                return Status(Code.UNRESOLVABLE, reason, details, self.name, NO_HELP)
            # Different node sets often give the same plan: each distinct plan is costed once.
            plans: dict[tuple[int, ...], Plan] = {tuple(dry.assignment.values()): dry}
            tried: set[bytes] = set()
            topological = bool(job.topology and job.topology.gather)
            for number, (level, domain) in enumerate(dry.candidates[: self.candidate_limit]):
                within = domain_nodes(state.topology, level, domain, topological, len(state.nodes))
                # A placement among some nodes reads only those with offer slots: each attempt
                # is the nodes it may use, and one set of them is placed once (`tried`).
                usable = within[slots[within] > 0]  # sorted, as `within` is
                attempts = [] if number == 0 else [usable]
                # The reference plan takes a domain's nodes by offer slots and name; the nodes
                # whose victims cost least are often elsewhere in the same domain: plan there too.
                pairs = pool.pairs_on(usable)
                pairs = pairs[eligible[pool.pair_job[pairs]]]
                cheap, shared = _node_picks(book, usable, pairs, slots, len(pods))
                if cheap is not None and len(cheap) < len(within):
                    attempts.append(cheap)
                if shared is not None and len(shared) < len(within):
                    attempts.append(shared)
                for nodes in attempts:
                    if nodes.tobytes() in tried:
                        continue
                    tried.add(nodes.tobytes())
                    attempt = framework.try_place(state, job, pods, nodes, slots, scores)
                    if isinstance(attempt, Plan):
                        plans.setdefault(tuple(attempt.assignment.values()), attempt)
            best: VictimPlan | None = None
            # The cheapest plan wins whatever the order plans are costed in (the rank breaks
            # ties), but the sooner it is found, the sooner the others stop (see `beat`): the
            # later plans, each domain's cheaper node picks, win more often, so go first.
            for rank, plan in reversed(list(enumerate(plans.values()))):
                # Without budgets a plan that is sure to lose to `best` stops early (see below).
                beat = best.key if best is not None and not book.budgets.pdbs else None
                candidate = self._victims_for(
                    state, job, pods, plan, eligible, quota_need, rank, beat
                )
                if candidate is not None and (best is None or candidate.key < best.key):
                    best = candidate
        if best is None:
            return Status(Code.UNRESOLVABLE, NOT_HELPFUL, {}, self.name, NO_HELP)
        return best

    def _victims_for(
        self,
        state: CycleState,
        job: JobInfo,
        pods: Sequence[PodInfo],
        plan: Plan,
        eligible: BoolArray,
        quota_need: Mapping[str, int],
        rank: int,
        beat: tuple[Any, ...] | None = None,
    ) -> VictimPlan | None:
        """Minimal victims for one plan, inside the dry run that released every candidate: keep back
        the highest-priority ones while every slot-limit Filter (resources, cards) still lets
        the plan's pods stay on each node they stand on, and the quota need is still met.

        `beat`, the key of the best plan so far when no budget can be broken: victims are found
        highest priority first, so once the first one outranks that plan's highest victim, or
        ties it with more victim jobs already, this plan cannot win and None is returned."""
        book = self.book(state)
        on_node: dict[int, list[PodInfo]] = {}
        all_pods = state.pods
        for key, idx in plan.assignment.items():
            placed = on_node.get(idx)
            if placed is None:
                on_node[idx] = [all_pods[key]]
            else:
                placed.append(all_pods[key])
        pool = book.pool
        pairs = pool.pairs_on(np.array(sorted(on_node), dtype=np.int64))
        pairs = pairs[eligible[pool.pair_job[pairs]]]
        if quota_need:
            ordered = _reprieve_order(book, np.flatnonzero(eligible))
        elif book.budgets.pdbs:
            ordered = _reprieve_order(book, np.unique(pool.pair_job[pairs]))
        else:  # each job once, in reprieve order: its rank sorted, mapped back
            ranks = sorted(set(pool.reprieve_rank[pool.pair_job[pairs]].tolist()))
            ordered = pool.reprieve_order[np.array(ranks, dtype=np.int64)]
        # The dry run released exactly `ordered`'s pods on these nodes. A node with none of
        # them never changes: the dry run that made the plan holds there. (The pairs are in
        # node order: each node once, as it first comes.)
        standing = list(dict.fromkeys(pool.pair_node[pairs].tolist()))
        # Without a quota need or budgets the victims depend only on `ordered` (in order) and,
        # per standing node, its state (`state.node_version`: a node's checks change only when
        # pods are taken onto or given back from it) and the templates planned there, so a plan
        # seen before in this round (a later search of the same shape tries the same domains)
        # is answered from `book.reprieved`.
        memo: tuple[Any, ...] | None = None
        if not quota_need and not book.budgets.pdbs:
            version, template = state.node_version, state.template_id
            memo = (
                ordered.tobytes(),
                *[(n, version[n], *[template(p) for p in on_node[n]]) for n in standing],
            )
            if memo in book.reprieved:
                known = book.reprieved[memo]
                if known is None:
                    return None
                first, complete = known
                if beat is not None and first and _loses(first, beat):
                    return None  # the first victims lose already: so do all of them
                if complete:
                    return _costed(state, plan, first, book, rank)
        jobs = pool.jobs
        consider = [jobs[i] for i in ordered.tolist()]
        checks = self.handle.node_checks(state, {n: on_node[n] for n in standing})
        for node_checks in checks.values():
            for c in node_checks:
                if not c.holds_keeping(()):
                    if memo is not None:
                        book.reprieved[memo] = None
                    return None
        victims: Sequence[VictimJob] | None
        if quota_need:
            victims = self._reprieve_for_quota(consider, checks, quota_need, beat)
        else:
            found, complete = _reprieve(consider, checks, beat)
            if memo is not None:
                book.reprieved[memo] = (tuple(found), complete)
            victims = found if complete else None
        if victims is None:
            return None
        return _costed(state, plan, victims, book, rank)

    def _reprieve_for_quota(
        self,
        consider: Sequence[VictimJob],
        checks: Mapping[int, Sequence[NodeCheck]],
        quota_need: Mapping[str, int],
        beat: tuple[Any, ...] | None,
    ) -> list[VictimJob] | None:
        """`_reprieve` when the job's own quota must also free `quota_need`: a victim is kept
        back only while the rest still free enough of it."""
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
                if beat is not None and _loses(victims, beat):
                    return None
        return victims


def _reprieve(
    consider: Sequence[VictimJob],
    checks: Mapping[int, Sequence[NodeCheck]],
    beat: tuple[Any, ...] | None,
) -> tuple[list[VictimJob], bool]:
    """The victims among `consider` (in reprieve order): each is kept back when every check of
    the nodes it holds pods on still holds with its pods there. With whether that is all of
    them: the search stops (False) once the plan is sure to lose to the plan keyed `beat` (see
    `_loses`)."""
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
        if beat is not None and _loses(victims, beat):
            return victims, False
    return victims, True


def _rule(job: JobInfo, victims: Sequence[VictimJob], in_quota: bool) -> str:
    """Which rule let these victims go (see the module docstring)."""
    if in_quota:
        return RULE_IN_QUOTA
    if any(v.priority >= job.priority for v in victims):
        return RULE_QUOTA_RECLAIM
    return RULE_LOWER_PRIORITY


def _loses(victims: Sequence[VictimJob], beat: tuple[Any, ...]) -> bool:
    """Whether a plan whose victims so far (highest priority first) are `victims` is sure to cost
    more than the plan keyed `beat` (no budget violations on either side)."""
    highest, count = victims[0].priority, len(victims)
    best_highest, best_count = int(beat[1]), int(beat[2])
    return highest > best_highest or (highest == best_highest and count > best_count)


def _reprieve_order(book: PreemptionBook, chosen: IntArray) -> IntArray:
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


NodePicks = tuple[IntArray | None, IntArray | None]
"""A domain's cheaper node sets to plan on: cheapest victims first, fewest new victim jobs."""


def _node_picks(
    book: PreemptionBook, usable: IntArray, pairs: IntArray, slots: IntArray, wanted: int
) -> NodePicks:
    """`_cheapest_nodes` and `_fewest_new_victims` for a domain's `usable` nodes, remembered
    by all they read besides the round's victim pool: the nodes, their offer slots, their
    eligible (node, job) pairs and the pods wanted (searches of one shape ask again and again
    for domains where nothing moved). The arrays are the caller's to read, never to change.

    One node (often: a job that fits on a node) is both picks when it covers `wanted`, else
    neither: what both functions give, without their arithmetic."""
    if len(usable) == 1:
        only = usable if int(slots[usable[0]]) >= wanted else None
        return only, only
    key = (usable.tobytes(), slots[usable].tobytes(), pairs.tobytes(), wanted)
    picks = book.node_picks.get(key)
    if picks is None:
        pool = book.pool
        picks = book.node_picks[key] = (
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


WITHOUT_VICTIMS = -(1 << 62)  # the "highest victim priority" of a plan without victims


def _costed(
    state: CycleState,
    plan: Plan,
    victims: Sequence[VictimJob],
    book: PreemptionBook,
    rank: int,
) -> VictimPlan:
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
    """Per resource, the cluster's allocatable (at least 1), as `_costed` divides by it (read
    once a round: the nodes are fixed)."""
    if book.totals is None:
        summed = state.totals().tolist()
        book.totals = {r: max(1, int(summed[i])) for r, i in state.resource_index.items()}
    return book.totals


def _shape_key(
    state: CycleState, job: JobInfo, pods: Sequence[PodInfo], in_quota: bool
) -> tuple[Any, ...] | None:
    """What makes two jobs' preemption searches comparable; None when it is not safe to say."""
    if in_quota or not pods or any(p.nominated_node for p in pods):
        return None
    if not _uniform(state, pods):
        return None
    return (state.template(pods[0]), job.topology, job.quota, job.preemption_policy)


def _uniform(state: CycleState, pods: Sequence[PodInfo]) -> bool:
    """Whether every pod has the first one's template (then one vector stands for all)."""
    first = state.template(pods[0])
    return all(state.template(p) == first for p in pods[1:])


def _amount(v: VictimJob, resource: str) -> int:
    return sum(int(p.requests.get(resource, 0)) for p in v.pods)


def _quota_need(failure: Failure) -> dict[str, int]:
    """For a quota rejection: how much of each dimension the job's own quota must free."""
    if failure.status.plugin != "ElasticQuota":
        return {}
    details = failure.status.details
    shortfall = details.get("quota_shortfall", {})
    own = shortfall.get(details.get("quota"), {})
    return {r: int(v) for r, v in own.items()}


def _terminating_on_nominated(state: CycleState, pods: Sequence[PodInfo]) -> list[str]:
    if pods and pods[0].job_id in state.nomination_timeouts:
        return []  # the gang let its nominated nodes go: nothing there to wait for
    nodes = sorted({p.nominated_node for p in pods if p.nominated_node in state.node_index})
    return [
        n
        for n in nodes
        if n is not None
        and any(p.terminating for p in state.bound_on_node.get(state.node_index[n], []))
    ]
