"""JobPreemption plugin. Extension point: PostFilter.

For a job that did not fit (koordinator.md, "Job-level preemption", with our differences):
1. skip when the job waits for victims chosen earlier that still terminate on its nominated nodes;
2. possible victims are whole running jobs of strictly lower priority without a protection label
   (in-quota preemption, when quota admission failed: only jobs of the same quota; reclaim, when the
   job's quota is within its min: also jobs of quotas using more than their runtime quota);
3. dry run with every possible victim removed: the whole job must fit, topology included, else
   "preemption not helpful";
4. rank the dry run's candidate domains by the victims of their fewest-victim-jobs node pick
   (highest priority, then jobs: a job spanning nodes is paid once); for the first
   `candidateLimit` of them plan the job inside the domain (and on the domain's nodes whose
   victims cost least, and on those evicting the fewest jobs), keep back victims highest
   priority first (budget-breaking ones first) while every slot-limit Filter's `node_checks`
   (resources, cards) still holds on the plan's nodes, and cost the plan: (budget violations,
   highest victim priority, victim jobs, resources, rank);
   Steps 3-4 take the candidates band by band, lowest priority first (kube-scheduler's
   lexicographic rule: the lowest highest-victim priority first, across every domain, then the
   fewest victims): the plan is made with the jobs up to the lowest band that makes room;
5. the cheapest plan evicts its victims and nominates the job's pods to their planned nodes; a plan
   that must break a PodDisruptionBudget is reported as blocked instead.
When preemption is not allowed (`preemptionPolicy: Never`) the same search yields the counterfactual
("would fit if these jobs were evicted"). Arguments: `candidateLimit` (default 6), `counterfactuals`
(default true).

A decision names its rule (`PostFilterResult.rule`): `InQuota` (the job's quota was short: jobs of
the same quota at lower priority), `QuotaReclaim` (some victim is not of lower priority: it is
borrowing beyond its runtime quota while the job's quota is within its min) or `LowerPriority`.
The dry runs go through the framework's `Handle`, the quota ledger too.

The plans' victims and costs, and the per-round `PreemptionBook`, are in `preemption_plans`; a
domain's cheaper node sets in `preemption_node_picks`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from scheduler.causes import (
    BLOCKED_BY_DISRUPTION_BUDGET,
    PREEMPTING,
    PREEMPTION_NEVER,
    PREEMPTION_NOT_HELPFUL,
    VICTIMS_TERMINATING,
    failure_cause,
)
from scheduler.causes import NO_VICTIMS as NO_VICTIMS_CODE
from scheduler.framework import (
    Arg,
    BoolArray,
    Code,
    Failure,
    Handle,
    IntArray,
    Plan,
    PostFilterResult,
    Status,
)
from scheduler.model import JobInfo, PodInfo
from scheduler.placement import domain_nodes
from scheduler.plugins.preemption_node_picks import CostedPicks, costed_node_picks
from scheduler.plugins.preemption_plans import (
    PreemptionBook,
    VictimPlan,
    costed_plan,
    loses,
    reprieve,
    reprieve_for_quota,
    reprieve_order,
)
from scheduler.state import CycleState
from scheduler.victims import BudgetBook, VictimJob, VictimPool, overused_quotas

NO_VICTIMS = "no potential victims"
NOT_HELPFUL = "preemption not helpful"
RULE_LOWER_PRIORITY = "LowerPriority"
RULE_IN_QUOTA = "InQuota"
RULE_QUOTA_RECLAIM = "QuotaReclaim"
LINEAR_BANDS = 4  # this many priority bands or fewer left to try: one after the other


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
            values = {"nodes": tuple(waiting)}
            status = Status(Code.WAIT, reason, {}, self.name, VICTIMS_TERMINATING, values)
            return PostFilterResult(status)
        allowed = job.preemption_policy != "Never" and all(
            p.preemption_policy != "Never" for p in pods
        )
        if not allowed and not self.counterfactuals:
            status = Status(
                Code.UNRESOLVABLE, "preemptionPolicy is Never", {}, self.name, PREEMPTION_NEVER
            )
            return PostFilterResult(status)
        quota_need = _quota_need(failure)
        found = self.search(state, job, pods, quota_need)
        if isinstance(found, Status):
            if quota_need:
                shortfall = failure.status.details.get("quota_shortfall", {})
                details = {"counterfactual": {"quota_increase": shortfall}}
                status = Status(
                    found.code, found.reason, details, self.name, found.cause, found.values
                )
                return PostFilterResult(status)
            return PostFilterResult(found)
        if not found.victims:
            # the job fits with no victim at all: what blocks it is not room on the nodes
            reason = f"{NOT_HELPFUL}: it would not make room for what blocks the job"
            status = Status(
                Code.UNRESOLVABLE, reason, {}, self.name, PREEMPTION_NOT_HELPFUL, {"victims": 0}
            )
            return PostFilterResult(status)
        counterfactual = {
            "evict_jobs": [v.id for v in found.victims],
            "fits_in": found.plan.decision.get("chosen_domain", ""),
            "cost": dict(found.cost),
        }
        if not allowed:
            reason = "preemption not allowed (preemptionPolicy: Never)"
            details = {"counterfactual": counterfactual}
            status = Status(Code.UNRESOLVABLE, reason, details, self.name, PREEMPTION_NEVER)
            return PostFilterResult(status)
        if found.violations:
            names = ", ".join(sorted(found.violations))
            status = Status(
                Code.UNRESOLVABLE,
                f"preemption blocked by PodDisruptionBudget {names}",
                {"counterfactual": counterfactual},
                self.name,
                BLOCKED_BY_DISRUPTION_BUDGET,
                {"budgets": tuple(sorted(found.violations))},
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
            Status(Code.SUCCESS, "preempting", {}, self.name, PREEMPTING),
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
        found = self._search(state, book, job, pods, quota_need, shape)
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
        shape: tuple[Any, ...] | None,
    ) -> VictimPlan | Status:
        eligible = self.eligible(state, job, pods, bool(quota_need))
        if not eligible.any():
            return Status(Code.UNRESOLVABLE, NO_VICTIMS, {}, self.name, NO_VICTIMS_CODE)
        pool = book.pool
        lower = eligible & (pool.priority < job.priority)
        bands = pool.levels[pool.levels < job.priority]  # some may have no candidate left
        if quota_need or len(bands) < 2 or not lower.any():
            return self._plan_victims(state, book, job, pods, quota_need, eligible)[0]
        # kube-scheduler's lexicographic rule: the lowest highest-victim priority first, across
        # every candidate domain, then the fewest victims. So the victims are offered band by
        # band: the plan is made with only the jobs up to the lowest priority band whose release
        # makes room for the job anywhere. Whether a band makes room grows with the band; and
        # within a round free capacity only shrinks, so the band a job of the same shape needed
        # is where the search starts (`band_floors`). Jobs eligible by quota reclaim (of a
        # priority not below the preemptor's) are candidates in every band.
        always = eligible & ~lower

        def up_to(band: int) -> BoolArray:
            mask: BoolArray = always | (lower & (pool.priority <= bands[band]))
            return mask

        floors = book.band_floors.get(shape, []) if shape is not None else []
        floor = max((b for n, b in floors if n <= len(pods)), default=int(bands[0]))
        start = min(int(np.searchsorted(bands, floor)), len(bands) - 1)
        found, roomy = self._plan_victims(state, book, job, pods, quota_need, up_to(start))
        while not roomy and start < len(bands) - 1 and len(bands) - start <= LINEAR_BANDS:
            # a few bands left: the next one up (a dry run that fails costs what a probe does)
            start += 1
            found, roomy = self._plan_victims(state, book, job, pods, quota_need, up_to(start))
        if not roomy and start < len(bands) - 1:
            # the lowest band that makes room, by bisection over the higher ones (a dry run each)
            low, high = start + 1, len(bands)
            while low < high:
                middle = (low + high) // 2
                if self._makes_room(state, book, job, pods, up_to(middle)):
                    high = middle
                else:
                    low = middle + 1
            if low == len(bands):  # not even every candidate makes room: say why
                return self._plan_victims(state, book, job, pods, quota_need, eligible)[0]
            start = low
            found, roomy = self._plan_victims(state, book, job, pods, quota_need, up_to(low))
        if shape is not None and roomy:
            book.band_floors.setdefault(shape, []).append((len(pods), int(bands[start])))
        if isinstance(found, Status) and roomy and start < len(bands) - 1:
            # room, but no plan held in the domains searched: every candidate, as before
            found = self._plan_victims(state, book, job, pods, quota_need, eligible)[0]
        return found

    def _makes_room(
        self,
        state: CycleState,
        book: PreemptionBook,
        job: JobInfo,
        pods: Sequence[PodInfo],
        candidates: BoolArray,
    ) -> bool:
        """Whether the job fits anywhere with every job of `candidates` gone (a dry run)."""
        kind = _release_kind(book, candidates)
        with state.releasing(*book.pool.release(state, np.flatnonzero(candidates), kind), kind):
            return isinstance(self.handle.try_place(state, job, pods), Plan)

    def _plan_victims(
        self,
        state: CycleState,
        book: PreemptionBook,
        job: JobInfo,
        pods: Sequence[PodInfo],
        quota_need: Mapping[str, int],
        eligible: BoolArray,
    ) -> tuple[VictimPlan | Status, bool]:
        """The cheapest plan with `eligible` as the candidates, or why there is none; and
        whether their release made room for the job at all (its dry run placed it)."""
        pool, framework = book.pool, self.handle
        kind = _release_kind(book, eligible)
        with state.releasing(*pool.release(state, np.flatnonzero(eligible), kind), kind):
            slots = framework.offer_slots(state, job, pods)
            scores = framework.node_scores(state, job)
            dry = framework.try_place(state, job, pods, slots=slots, scores=scores)
            if isinstance(dry, Failure):
                # with every candidate gone the job still does not fit: how many nodes, and
                # why each was ruled out even then, as the dry run's own cause
                reason = f"{NOT_HELPFUL}: {dry.status.reason}"
                details = dict(dry.status.details)
                values = {"dry_run": failure_cause(dry, len(pods))}
                status = Status(
                    Code.UNRESOLVABLE, reason, details, self.name, PREEMPTION_NOT_HELPFUL, values
                )
                return status, False
            # Different node sets often give the same plan: each distinct plan is costed once.
            plans: dict[tuple[int, ...], Plan] = {tuple(dry.assignment.values()): dry}
            tried: set[bytes] = set()
            topological = bool(job.topology and job.topology.gather)
            # Every candidate domain's cheaper node picks are cheap to find (array work, and a
            # greedy over at most `GREEDY_NODE_LIMIT` nodes); placing the job there is not. So
            # the domains are ranked by the victims of their fewest-victim-jobs pick (highest
            # priority, then jobs; the dry run's order breaks ties, a domain without such a
            # pick comes after those with one) and only the first `candidateLimit` are planned.
            domains: list[tuple[tuple[int, ...], int, IntArray, IntArray, CostedPicks]] = []
            for number, (level, domain) in enumerate(dry.candidates):
                within = domain_nodes(state.topology, level, domain, topological, len(state.nodes))
                # A placement among some nodes reads only those with offer slots: each attempt
                # is the nodes it may use, and one set of them is placed once (`tried`).
                usable = within[slots[within] > 0]  # sorted, as `within` is
                pairs = pool.pairs_on(usable)
                pairs = pairs[eligible[pool.pair_job[pairs]]]
                picks = costed_node_picks(book.node_picks, pool, usable, pairs, slots, len(pods))
                rank_key = (0, *picks[2], number) if picks[2] is not None else (1, 0, 0, number)
                domains.append((rank_key, number, within, usable, picks))
            domains.sort(key=lambda d: d[0])
            for _key, number, within, usable, (cheap, shared, _cost) in domains[
                : self.candidate_limit
            ]:
                attempts = [] if number == 0 else [usable]
                # The reference plan takes a domain's nodes by offer slots and name; the nodes
                # whose victims cost least are often elsewhere in the same domain: plan there too.
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
            status = Status(Code.UNRESOLVABLE, NOT_HELPFUL, {}, self.name, PREEMPTION_NOT_HELPFUL)
            return status, True
        return best, True

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
            ordered = reprieve_order(book, np.flatnonzero(eligible))
        elif book.budgets.pdbs:
            ordered = reprieve_order(book, np.unique(pool.pair_job[pairs]))
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
                if beat is not None and first and loses(first, beat):
                    return None  # the first victims lose already: so do all of them
                if complete:
                    return costed_plan(state, plan, first, book, rank)
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
            victims = reprieve_for_quota(consider, checks, quota_need, beat)
        else:
            found, complete = reprieve(consider, checks, beat)
            if memo is not None:
                book.reprieved[memo] = (tuple(found), complete)
            victims = found if complete else None
        if victims is None:
            return None
        return costed_plan(state, plan, victims, book, rank)


def _release_kind(book: PreemptionBook, candidates: BoolArray) -> int:
    """A release's kind for the memos (`CycleState.releasing`): the highest priority it frees
    (a band; every candidate of a search is a band too), so a dry run is compared with the last
    one that released nearly the same jobs."""
    priorities = book.pool.priority[candidates]
    return int(priorities.max()) if len(priorities) else 0


def _rule(job: JobInfo, victims: Sequence[VictimJob], in_quota: bool) -> str:
    """Which rule let these victims go (see the module docstring)."""
    if in_quota:
        return RULE_IN_QUOTA
    if any(v.priority >= job.priority for v in victims):
        return RULE_QUOTA_RECLAIM
    return RULE_LOWER_PRIORITY


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
