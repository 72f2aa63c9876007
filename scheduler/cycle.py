"""The job cycle: one pending job through PreFilter, Filter, Score, Placement, Permit and Reserve.

`Framework` holds the profile's plugin instances sorted by extension point and runs them; the
preemption plugin calls back into `Framework.try_place` for its dry runs, so a preemption plan is
checked with exactly the filters (devices, topology) a normal placement uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.framework import (
    Code,
    Failure,
    FloatArray,
    IntArray,
    NodeCheck,
    Plan,
    PodAllocation,
    Status,
)
from scheduler.model import JobInfo, PodInfo
from scheduler.placement import NodeScores, PlacementOutcome
from scheduler.state import CycleState


@dataclass
class JobOutcome:
    """What the cycle decided for one job (placed, or the failure to report / preempt for)."""

    job: JobInfo
    plan: Plan | None = None
    allocations: dict[str, PodAllocation] = field(default_factory=dict)
    failure: Failure | None = None


class Framework:
    def __init__(self, plugins: Sequence[Any]) -> None:
        self.plugins = list(plugins)

        def having(method: str) -> list[Any]:
            return [p for p in self.plugins if callable(getattr(p, method, None))]

        self.queue_sort = having("sort_key")
        self.pre_filters = having("pre_filter")
        self.node_masks = having("node_mask")
        self.slot_limits = having("slot_limits")
        self.scores = having("score_nodes")
        self.placers = having("place")
        self.permits = having("permit")
        self.reserves = having("reserve")
        self.post_filters = having("post_filter")
        self.setups = having("setup")
        self.fallbacks = having("fallback_pods")
        self.partials = having("places_partially")
        if not self.placers:
            raise ValueError("a profile needs a Placement plugin (NetworkTopology)")

    def start(self, state: CycleState) -> None:
        state.mask_plugins = self.node_masks
        state.plugin_data["framework"] = self
        for plugin in self.setups:
            plugin.setup(state)

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
            for plugin in self.fallbacks:
                fewer = plugin.fallback_pods(state, job, pods)
                if fewer:
                    retry = self.try_place(state, job, fewer)
                    if isinstance(retry, Plan):
                        result = retry
                        break
        if isinstance(result, Failure) and any(p.places_partially(job) for p in self.partials):
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
        done: list[Any] = []
        for plugin in self.reserves:
            reserved = plugin.reserve(state, job, plan)
            if not reserved.status.ok:
                for earlier in reversed(done):
                    earlier.unreserve(state, job, plan)
                state.restore_reservations(job.id, held)
                return JobOutcome(job, failure=Failure(reserved.status))
            done.append(plugin)
            for key, alloc in reserved.allocations.items():
                allocations[key] = alloc
        state.assume(plan.assignment)
        return JobOutcome(job, plan=plan, allocations=allocations)

    def offer_slots(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> IntArray:
        """Per node, how many of `pods` fit in order, by every slot-limit Filter (the minimum)."""
        everywhere = np.arange(len(state.nodes), dtype=np.int64)
        slots: IntArray | None = None
        for plugin in self.slot_limits:
            limit = plugin.slot_limits(state, job, pods, everywhere)
            if limit is not None:
                slots = limit if slots is None else np.minimum(slots, limit)
        if slots is None:
            slots = np.full(len(state.nodes), len(pods), dtype=np.int64)
        return slots

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
        nodes = np.repeat(outcome.node_order, outcome.counts)
        assignment = {pod.key: int(node) for pod, node in zip(pods, nodes, strict=True)}
        if not self._fits(state, assignment):
            status = Status(
                Code.UNSCHEDULABLE,
                "pods of different shapes do not fit the nodes planned for them",
                {},
                "NodeResourcesFit",
            )
            return Failure(status)
        return Plan(assignment, outcome.decision, outcome.candidates)

    def node_scores(self, state: CycleState, job: JobInfo) -> NodeScores | None:
        """Every Score plugin's per-node score for the job, summed (None without Score plugins)."""
        if not self.scores:
            return None
        everywhere = np.arange(len(state.nodes), dtype=np.int64)
        total: FloatArray = sum(p.score_nodes(state, job, everywhere) for p in self.scores)
        return NodeScores(state.topology, total)

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
        if not self._fits(state, assignment, always=True):
            return None
        slots = self.offer_slots(state, job, pods)
        planned = np.bincount(list(assignment.values()), minlength=len(slots))
        if (planned > slots).any():
            return None
        return Plan(assignment, {"chosen_domain": "nominated nodes", "nominated": True})

    def _fits(self, state: CycleState, assignment: dict[str, int], always: bool = False) -> bool:
        """Re-check a plan pod by pod when the job mixes templates (the slot count is per run)."""
        pods = [state.pods[k] for k in assignment]
        first = pods[0]
        same = all(
            p.requests == first.requests and p.node_selector == first.node_selector for p in pods
        )
        if same and not always:
            return True
        need: dict[int, IntArray] = {}
        for pod in pods:
            idx = assignment[pod.key]
            if not state.pod_mask(pod).allowed[idx]:
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
        reasons: dict[str, int] = {}
        for plugin in self.slot_limits:
            for reason, count in plugin.explain(state, job, pods, zero).items():
                reasons[reason] = reasons.get(reason, 0) + count
        details: dict[str, Any] = dict(outcome.details)
        details["node_reasons"] = reasons
        if outcome.topology_decided:
            status = Status(Code.UNSCHEDULABLE, outcome.message, details, "NetworkTopology")
            return Failure(status, reasons)
        total = len(state.nodes)
        available = total - len(zero)
        summary = ", ".join(
            f"{count} {reason}" for reason, count in sorted(reasons.items(), key=_reason_order)
        )
        message = f"{available}/{total} nodes are available"
        message += f": {summary}." if summary else "."
        if available:
            message += (
                f" The job needs {len(pods)} offer slots, the nodes offer {int(slots.sum())}."
            )
        return Failure(Status(Code.UNSCHEDULABLE, message, details, "NodeResourcesFit"), reasons)


def _reason_order(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])
