"""Coscheduling (gang) plugin. Extension points: PreFilter, Permit, Fallback.

A job is a gang group: all of its pending pods are placed together or none are. PreFilter waits
until every member gang has at least min-available pods created; Permit admits a plan only when
each member gang reaches min-available (bound pods plus planned ones). When the whole group does
not fit, `fallback_pods` offers the smaller set that just reaches every gang's min-available, so a
gang with min-available < total can start with its minimum. A group whose gangs are all
NonStrict (`places_partially`) goes further, as Koordinator's NonStrict mode lets each member
schedule on its own: the framework places every member that fits, whatever its name, as long as
each gang reaches min-available. A Strict group is all-or-nothing: one member that does not fit
rejects the group for the round and nothing of it is kept (Koordinator's Strict mode rejects the
whole gang group and releases its members' reservations).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework import Code, Handle, Plan, Status
from scheduler.model import JobInfo, PodInfo
from scheduler.state import CycleState


def _gang_counts(state: CycleState, job: JobInfo) -> dict[str, tuple[int, int]]:
    """Per member gang: (pods that exist, pods already bound)."""
    counts: dict[str, tuple[int, int]] = {g.id: (0, 0) for g in job.gangs}
    for key in job.pod_keys:
        pod = state.pods.get(key)
        if pod is None or pod.gang_id not in counts:
            continue
        exist, bound = counts[pod.gang_id]
        counts[pod.gang_id] = (exist + 1, bound + (1 if pod.consumes_node else 0))
    return counts


class Coscheduling:
    name = "Coscheduling"
    extension_points = frozenset({"PreFilter", "Permit", "Fallback"})

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = dict(args or {})

    def pre_filter(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> Status:
        for gang in job.gangs:
            exist, _bound = _gang_counts(state, job)[gang.id]
            if exist < gang.min_available:
                return Status(
                    Code.WAIT,
                    f"gang {gang.id} has {exist} of min-available {gang.min_available} pods",
                    {"gang": gang.id, "pods": exist, "min_available": gang.min_available},
                    self.name,
                    "GangIncomplete",
                )
        return Status.success()

    def permit(self, state: CycleState, job: JobInfo, plan: Plan) -> Status:
        planned: dict[str | None, int] = {}
        for key in plan.assignment:
            gang_id = state.pods[key].gang_id
            planned[gang_id] = planned.get(gang_id, 0) + 1
        counts = _gang_counts(state, job)
        for gang in job.gangs:
            reached = counts[gang.id][1] + planned.get(gang.id, 0)
            if reached < gang.min_available:
                return Status(
                    Code.UNSCHEDULABLE,
                    f"gang {gang.id} would have {reached} of min-available {gang.min_available}",
                    {"gang": gang.id, "reached": reached, "min_available": gang.min_available},
                    self.name,
                    "GangShort",
                )
        return Status.success()

    def places_partially(self, job: JobInfo) -> bool:
        """NonStrict: members that fit are placed without the rest (min-available still holds)."""
        return bool(job.gangs) and all(g.mode == "NonStrict" for g in job.gangs)

    def fallback_pods(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]
    ) -> list[PodInfo] | None:
        """The first pods (in placement order) that just reach every gang's min-available."""
        if not job.gangs:
            return None
        counts = _gang_counts(state, job)
        missing = {g.id: max(0, g.min_available - counts[g.id][1]) for g in job.gangs}
        chosen: list[PodInfo] = []
        for pod in pods:
            if pod.gang_id in missing and missing[pod.gang_id] > 0:
                missing[pod.gang_id] -= 1
                chosen.append(pod)
            elif pod.gang_id not in missing:
                chosen.append(pod)  # a pod outside the group's gangs is not optional
        if len(chosen) >= len(pods) or not chosen:
            return None
        return chosen
