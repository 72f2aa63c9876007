"""The job cycle: one pending job through PreFilter, Filter, Score, Placement, Permit and Reserve.

`Framework` builds the profile's plugins, giving each itself as the `Handle`, sorts them by the
extension points they declare (the profile builder has checked they implement them) and runs
them. The preemption plugin calls back into `Handle.try_place` for its dry runs, so a preemption
plan is checked with exactly the filters (devices, topology) a normal placement uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from scheduler.causes import NODE_REJECTED, NODES_UNAVAILABLE, SHAPES_DO_NOT_FIT, TOPOLOGY_NO_DOMAIN
from scheduler.framework import (
    BoolArray,
    Code,
    Failure,
    FallbackPlugin,
    FloatArray,
    IntArray,
    NodeCheck,
    NodeMask,
    NodeMaskPlugin,
    PermitPlugin,
    PlacementPlugin,
    Plan,
    Plugin,
    PodAllocation,
    PostFilterPlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    QuotaLedger,
    Refusal,
    ReservePlugin,
    RuntimeQuotaPlugin,
    ScorePlugin,
    SetupPlugin,
    SlotLimitPlugin,
    Status,
)
from scheduler.model import JobInfo, PodInfo
from scheduler.placement import NodeScores, PlacementOutcome
from scheduler.profile import Profile, ProfileError
from scheduler.slot_memo import SlotMemo
from scheduler.state import CycleState
from scheduler.templates import template_fields


@dataclass
class JobOutcome:
    """What the cycle decided for one job (placed, or the failure to report / preempt for)."""

    job: JobInfo
    plan: Plan | None = None
    allocations: dict[str, PodAllocation] = field(default_factory=dict)
    failure: Failure | None = None


class Framework:
    """The profile's plugins by extension point, and the `Handle` they are built with."""

    def __init__(self, profile: Profile | None = None) -> None:
        self.plugins: list[Plugin] = (profile or Profile.default()).build(self)
        self.queue_sort: list[QueueSortPlugin] = self._at("QueueSort", QueueSortPlugin)
        self.setups: list[SetupPlugin] = self._at("Setup", SetupPlugin)
        self.pre_filters: list[PreFilterPlugin] = self._at("PreFilter", PreFilterPlugin)
        self.node_masks: list[NodeMaskPlugin] = self._at("Filter", NodeMaskPlugin)
        self.slot_limits: list[SlotLimitPlugin] = self._at("Filter", SlotLimitPlugin)
        self.scores: list[ScorePlugin] = self._at("Score", ScorePlugin)
        self.placers: list[PlacementPlugin] = self._at("Placement", PlacementPlugin)
        self.permits: list[PermitPlugin] = self._at("Permit", PermitPlugin)
        self.reserves: list[ReservePlugin] = self._at("Reserve", ReservePlugin)
        self.post_filters: list[PostFilterPlugin] = self._at("PostFilter", PostFilterPlugin)
        self.fallbacks: list[FallbackPlugin] = self._at("Fallback", FallbackPlugin)
        self.quotas: list[RuntimeQuotaPlugin] = self._at("RuntimeQuota", RuntimeQuotaPlugin)
        if len(self.placers) != 1:
            raise ProfileError({"": "a profile needs exactly one Placement plugin"})
        if len(self.queue_sort) > 1 or len(self.quotas) > 1:
            raise ProfileError({"": "a profile takes at most one QueueSort and one RuntimeQuota"})

    def _at(self, point: str, kind: type) -> list[Any]:
        """The plugins declaring `point` that implement its Protocol `kind` (for Filter: that
        flavour); the profile builder has checked the methods are there."""
        return [p for p in self.plugins if point in p.extension_points and isinstance(p, kind)]

    def plugin(self, name: str) -> Plugin:
        """The profile's plugin of this name (KeyError when it has none)."""
        for plugin in self.plugins:
            if plugin.name == name:
                return plugin
        raise KeyError(name)

    def start(self, state: CycleState) -> None:
        # Pods are grouped into templates by every field the Filters that answer per template
        # read (node masks, slot counts remembered per template): their declared `pod_fields`,
        # or every spec field for one that declares none, so a new Filter cannot be forgotten.
        per_template = [*self.node_masks, *(p for p in self.slot_limits if _by_template(p))]
        state.template_fields = template_fields(
            [getattr(plugin, "pod_fields", None) for plugin in per_template]
        )
        for plugin in self.setups:
            plugin.setup(state)

    # --- the Handle: what plugins may ask of the framework and of each other -------------------
    def runtime_quota(self, state: CycleState) -> QuotaLedger | None:
        return self.quotas[0].runtime_quota(state) if self.quotas else None

    def pod_mask(self, state: CycleState, pod: PodInfo) -> NodeMask:
        key = state.template(pod)
        cached = state.cache.masks.get(key)
        if cached is not None:
            return cached
        verdicts = self.mask_verdicts(state, pod)
        allowed: BoolArray = np.ones(len(state.nodes), dtype=np.bool_)
        for verdict in verdicts:
            allowed &= verdict.allowed
        mask = NodeMask(allowed=allowed, reason="; ".join(v.reason for v in verdicts))
        state.cache.masks[key] = mask
        return mask

    def mask_verdicts(self, state: CycleState, pod: PodInfo) -> list[NodeMask]:
        key = state.template(pod)
        verdicts = state.cache.verdicts.get(key)
        if verdicts is None:
            verdicts = [
                replace(v, plugin=p.name)
                for p in self.node_masks
                if (v := p.node_mask(state, pod)) is not None
            ]
            state.cache.verdicts[key] = verdicts
        return verdicts

    def mask_reasons(
        self, state: CycleState, pod: PodInfo, node_indices: IntArray
    ) -> tuple[dict[str, dict[Refusal, int]], BoolArray]:
        """Per node-mask Filter, how many of `node_indices` it rejects for `pod` (a node counted
        under the first Filter that rejects it, as kube-scheduler reports one status per node),
        and which of those nodes every Filter allows."""
        told: dict[str, dict[Refusal, int]] = {}
        asked = np.zeros(len(state.nodes), dtype=np.bool_)
        asked[node_indices] = True
        for verdict in self.mask_verdicts(state, pod):
            hit = asked & ~verdict.allowed
            if hit.any():
                reasons = told.setdefault(verdict.plugin, {})
                refusal = Refusal(verdict.code, verdict.reason)
                reasons[refusal] = reasons.get(refusal, 0) + int(hit.sum())
                asked &= verdict.allowed
        return told, asked

    def sort(self, state: CycleState, jobs: Sequence[JobInfo]) -> list[JobInfo]:
        if not self.queue_sort:
            return sorted(jobs, key=lambda j: j.id)
        plugin = self.queue_sort[0]
        return sorted(jobs, key=lambda j: plugin.sort_key(state, j))

    # --- the cycle ----------------------------------------------------------------------------
    def schedule(self, state: CycleState, job: JobInfo, pods: list[PodInfo]) -> JobOutcome:
        """Place `job` whole (assumed into `state`) or return why not; nothing partial remains."""
        held = state.release_reservations(job.id)
        for plugin in self.pre_filters:
            status = plugin.pre_filter(state, job, pods)
            if not status.ok:
                state.restore_reservations(job.id, held)
                return JobOutcome(job, failure=Failure(status))
        nominated = self._nominated_plan(state, job, pods) if held else None
        result = nominated if nominated is not None else self.try_place(state, job, pods)
        if isinstance(result, Failure):
            for fallback in self.fallbacks:
                fewer = fallback.fallback_pods(state, job, pods)
                if fewer:
                    retry = self.try_place(state, job, fewer)
                    if isinstance(retry, Plan):
                        result = retry
                        break
        if isinstance(result, Failure) and any(p.places_partially(job) for p in self.fallbacks):
            result = self._fitting_members(state, job, pods) or result
        if isinstance(result, Failure):
            state.restore_reservations(job.id, held)
            return JobOutcome(job, failure=result)
        return self._commit(state, job, result, held)

    def _fitting_members(self, state: CycleState, job: JobInfo, pods: list[PodInfo]) -> Plan | None:
        """A NonStrict gang's members that fit, whatever their names: per pod shape, in order of
        first appearance, as many more of that shape as still fit (a binary search over counts,
        so a gang of one shape costs a few placements, not one per pod). Permit still requires
        every gang's min-available."""
        order = {pod.key: i for i, pod in enumerate(pods)}
        shapes: dict[tuple[Any, ...], list[PodInfo]] = {}
        for pod in pods:
            shapes.setdefault(state.template(pod), []).append(pod)
        chosen: list[PodInfo] = []
        plan: Plan | None = None

        def attempt(extra: list[PodInfo]) -> Plan | None:
            trial = sorted(chosen + extra, key=lambda p: order[p.key])
            placed = self.try_place(state, job, trial)
            return placed if isinstance(placed, Plan) else None

        for group in shapes.values():
            low, high, best = 0, len(group), None
            while low < high:
                middle = (low + high + 1) // 2
                placed = attempt(group[:middle])
                if placed is not None:
                    low, best = middle, placed
                else:
                    high = middle - 1
            if best is not None:
                chosen += group[:low]
                plan = best
        if plan is None or len(chosen) >= len(pods):
            return None
        return plan

    def _commit(
        self, state: CycleState, job: JobInfo, plan: Plan, held: list[tuple[int, IntArray]]
    ) -> JobOutcome:
        for plugin in self.permits:
            status = plugin.permit(state, job, plan)
            if not status.ok:
                state.restore_reservations(job.id, held)
                return JobOutcome(job, failure=Failure(status))
        allocations: dict[str, PodAllocation] = {}
        done: list[ReservePlugin] = []
        for reserver in self.reserves:
            reserved = reserver.reserve(state, job, plan)
            if not reserved.status.ok:
                for earlier in reversed(done):
                    earlier.unreserve(state, job, plan)
                state.restore_reservations(job.id, held)
                return JobOutcome(job, failure=Failure(reserved.status))
            done.append(reserver)
            for key, alloc in reserved.allocations.items():
                allocations[key] = alloc
        state.assume(plan.assignment)
        return JobOutcome(job, plan=plan, allocations=allocations)

    def offer_slots(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> IntArray:
        """Per node, how many of `pods` fit in order, by every slot-limit Filter (the minimum)."""
        slots: IntArray | None = None
        memo = _slot_memo(state)
        runs = memo.runs(state, pods)
        for plugin in self.slot_limits:
            if _by_template(plugin):
                limit = memo.slot_limits(plugin, state, job, pods, runs)
            else:
                limit = plugin.slot_limits(state, job, pods, memo.everywhere)
            if limit is not None:
                slots = limit.copy() if slots is None else np.minimum(slots, limit)
        if runs in memo.mask_caps:
            cap = memo.mask_caps[runs]
        else:
            cap = memo.mask_caps[runs] = self._mask_cap(state, pods, runs)
        if slots is None:
            return cap if cap is not None else np.full(len(state.nodes), len(pods), dtype=np.int64)
        if cap is not None:
            slots = np.minimum(slots, cap)
        return slots

    def _mask_cap(self, state: CycleState, pods: Sequence[PodInfo], runs: Any) -> IntArray | None:
        """Per node, how many of `pods` every node-mask Filter lets there (None: all, anywhere).

        The framework applies the masks whichever slot-limit plugins a profile enables, so
        removing one plugin removes only its own rule (taints, affinity and cordons still hold
        without NodeResourcesFit)."""
        if not self.node_masks:
            return None
        masks: list[tuple[BoolArray, int]] = []
        start = 0
        for _, count in runs:
            masks.append((self.pod_mask(state, pods[start]).allowed, count))
            start += count
        if all(allowed.all() for allowed, _ in masks):
            return None
        cap: IntArray = np.zeros(len(state.nodes), dtype=np.int64)
        for allowed, count in masks:
            cap += allowed * count
        cap.flags.writeable = False  # remembered for the round (`SlotMemo.mask_caps`)
        return cap

    def node_checks(
        self, state: CycleState, on_node: Mapping[int, Sequence[PodInfo]]
    ) -> dict[int, list[NodeCheck]]:
        """During a preemption dry run, per node of `on_node` (node -> the pods a plan puts
        there), every slot-limit Filter's check that those pods fit with the released bound pods
        gone, from the Filters whose count depends on them."""
        checks: dict[int, list[NodeCheck]] = {n: [] for n in on_node}
        for plugin in self.slot_limits:
            for node, check in plugin.node_checks(state, on_node).items():
                checks[node].append(check)
        return checks

    def try_place(
        self,
        state: CycleState,
        job: JobInfo,
        pods: Sequence[PodInfo],
        within: IntArray | None = None,
        slots: IntArray | None = None,
        scores: NodeScores | None = None,
    ) -> Plan | Failure:
        """Offer slots -> topology placement -> pod assignment; no state change.

        `within` restricts the placement to those node indices (a preemption candidate domain);
        `slots` and `scores` reuse what was computed for the same job and state.
        """
        if slots is None:
            slots = self.offer_slots(state, job, pods)
        if within is not None:
            kept = np.zeros_like(slots)
            kept[within] = slots[within]
            slots = kept
        if scores is None:
            scores = self.node_scores(state, job)
        outcome: PlacementOutcome = self.placers[0].place(
            state, job, len(pods), slots, scores, within
        )
        if not outcome.ok:
            return self.failure(state, job, pods, slots, outcome)
        assert outcome.node_order is not None and outcome.counts is not None
        nodes: list[int] = np.repeat(outcome.node_order, outcome.counts).tolist()
        if len(_slot_memo(state).runs(state, pods)) == 1:
            # pods of one template (one run) fit as counted
            assignment = {pod.key: node for pod, node in zip(pods, nodes, strict=True)}
        else:
            # the counts are per node, summed over the runs: each pod needs a planned node that
            # its own spec (masks, requests) allows
            found = self._assign(state, pods, nodes)
            if found is None:
                status = Status(
                    Code.UNSCHEDULABLE,
                    "pods of different shapes do not fit the nodes planned for them",
                    {},
                    "NodeResourcesFit",
                    SHAPES_DO_NOT_FIT,
                )
                return Failure(status)
            assignment = found
        return Plan(assignment, outcome.decision, outcome.candidates)

    def _assign(
        self, state: CycleState, pods: Sequence[PodInfo], nodes: list[int]
    ) -> dict[str, int] | None:
        """Pods of several templates onto the planned node slots (`nodes`, one per pod), each on
        a node its own masks allow and where its requests fit with the others assigned there.

        In order when that holds (pods keep their rank order along the planned nodes); else the
        most constrained template's pods first, each to the first planned slot that holds it.
        None when no such assignment is found."""
        in_order = {pod.key: node for pod, node in zip(pods, nodes, strict=True)}
        if self._fits(state, in_order):
            return in_order
        left: dict[int, int] = {}
        for node in nodes:
            left[node] = left.get(node, 0) + 1
        planned = np.array(sorted(left), dtype=np.int64)
        room = {int(n): row for n, row in zip(planned, state.free(planned).copy(), strict=True)}
        by_template: dict[int, list[PodInfo]] = {}
        for pod in pods:
            by_template.setdefault(state.template_id(pod), []).append(pod)
        allowed = {t: self.pod_mask(state, group[0]).allowed for t, group in by_template.items()}
        order = sorted(by_template, key=lambda t: (int(allowed[t][planned].sum()), t))
        slots = list(dict.fromkeys(nodes))  # the planned nodes, in plan order
        assignment: dict[str, int] = {}
        for template in order:
            ok = allowed[template]
            for pod in by_template[template]:
                need = state.vector(pod)
                for node in slots:
                    if left[node] and ok[node] and (room[node] >= need).all():
                        left[node] -= 1
                        room[node] = room[node] - need
                        assignment[pod.key] = node
                        break
                else:
                    return None
        return {pod.key: assignment[pod.key] for pod in pods}

    def node_scores(self, state: CycleState, job: JobInfo) -> NodeScores | None:
        """Every Score plugin's per-node score for the job, summed (None without Score plugins),
        counted when a placement first reads them (one that fails never does): the state
        must stay as it is until the placements given these scores are done."""
        if not self.scores:
            return None

        def counting() -> FloatArray:
            everywhere = np.arange(len(state.nodes), dtype=np.int64)
            total: FloatArray = np.zeros(len(state.nodes), dtype=np.float64)
            for plugin in self.scores:
                total = total + plugin.score_nodes(state, job, everywhere)
            return total

        return NodeScores(state.topology, counting=counting)

    def _nominated_plan(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]
    ) -> Plan | None:
        """Keep a preemptor on the nodes nominated for it when they now hold it whole."""
        assignment: dict[str, int] = {}
        for pod in pods:
            idx = state.node_index.get(pod.nominated_node or "")
            if idx is None:
                return None
            assignment[pod.key] = idx
        if not self._fits(state, assignment):
            return None
        slots = self.offer_slots(state, job, pods)
        planned = np.bincount(list(assignment.values()), minlength=len(slots))
        if (planned > slots).any():
            return None
        return Plan(assignment, {"chosen_domain": "nominated nodes", "nominated": True})

    def _fits(self, state: CycleState, assignment: dict[str, int]) -> bool:
        """Check a plan pod by pod: each pod's own masks allow its node, and the pods planned
        on a node fit its free resources together."""
        pods = [state.pods[k] for k in assignment]
        need: dict[int, IntArray] = {}
        for pod in pods:
            idx = assignment[pod.key]
            if not self.pod_mask(state, pod).allowed[idx]:
                return False
            need[idx] = need.get(idx, 0) + state.vector(pod)
        rows = np.array(sorted(need), dtype=np.int64)
        free = state.free(rows)
        return bool(all((free[i] >= need[int(n)]).all() for i, n in enumerate(rows)))

    def failure(
        self,
        state: CycleState,
        job: JobInfo,
        pods: Sequence[PodInfo],
        slots: IntArray,
        outcome: PlacementOutcome,
    ) -> Failure:
        """The unschedulable status: the topology message, or kube-scheduler's node summary."""
        zero = np.flatnonzero(slots == 0).astype(np.int64)
        unavailable = len(zero)
        reasons: dict[str, int] = {}
        explained: dict[str, dict[Refusal, int]] = {}
        if len(pods) and len(zero):
            # nodes a node-mask Filter rejects are counted under that Filter only (the framework
            # owns the masks); the slot-limit plugins explain the nodes every mask allows
            masked, allowed = self.mask_reasons(state, pods[0], zero)
            explained.update((name, dict(told)) for name, told in masked.items())
            zero = np.flatnonzero(allowed).astype(np.int64)
        for plugin in self.slot_limits:
            told = _refusals(plugin.explain(state, job, pods, zero))
            if told:
                # a Filter of both flavours: its mask's counts and its slot counts, together
                mine = explained.setdefault(plugin.name, {})
                for refusal, count in told.items():
                    mine[refusal] = mine.get(refusal, 0) + count
        for told in explained.values():
            for refusal, count in told.items():
                reasons[refusal.text] = reasons.get(refusal.text, 0) + count
        details: dict[str, Any] = dict(outcome.details)
        details["node_reasons"] = reasons
        # what the cause reports beyond the details (the roomiest domain is found by the round,
        # only for the failures it reports: preemption dry runs fail often and need none of it)
        values: dict[str, Any] = {"pods": len(pods)}
        if outcome.topology_decided:
            values["layer"] = details.get("gather_layer", "")
            status = Status(
                Code.UNSCHEDULABLE, outcome.message, details, "NetworkTopology", TOPOLOGY_NO_DOMAIN
            )
            return Failure(status, reasons, explained, values)
        total = len(state.nodes)
        available = total - unavailable
        offered = int(slots.sum())
        values.update(available_nodes=available, total_nodes=total, offer_slots=offered)
        summary = ", ".join(
            f"{count} {reason}" for reason, count in sorted(reasons.items(), key=_reason_order)
        )
        message = f"{available}/{total} nodes are available"
        message += f": {summary}." if summary else "."
        if available:
            message += f" The job needs {len(pods)} offer slots, the nodes offer {offered}."
        status = Status(Code.UNSCHEDULABLE, message, details, "NodeResourcesFit", NODES_UNAVAILABLE)
        return Failure(status, reasons, explained, values)


def _slot_memo(state: CycleState) -> SlotMemo:
    """The round's `SlotMemo` (kept with the state, as every answer it holds is of that state)."""
    memo = state.cache.slot_memo
    if memo is None:
        memo = state.cache.slot_memo = SlotMemo(state)
    return memo


def _by_template(plugin: SlotLimitPlugin) -> bool:
    return bool(getattr(plugin, "slots_by_template", False))


def _refusals(told: Mapping[Refusal, int] | Mapping[str, int]) -> dict[Refusal, int]:
    """A slot-limit Filter's counts by refusal; a plain text (a plugin that gives no code) is a
    `NodeRejected` refusal in those words."""
    counted: dict[Refusal, int] = {}
    for key, count in told.items():
        refusal = key if isinstance(key, Refusal) else Refusal(NODE_REJECTED, str(key))
        counted[refusal] = counted.get(refusal, 0) + count
    return counted


def _reason_order(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])
