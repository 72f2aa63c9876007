"""Coscheduling (gang) plugin. Extension points: PreFilter, Permit, Fallback.

A job is a gang group: all of its pending pods are placed together or none are. PreFilter waits
until every member gang has at least min-available pods created; Permit admits a plan only when
each member gang reaches min-available, counting the members its match policy counts
(`gang.scheduling.koordinator.sh/match-policy`, Koordinator's `isGangValidForPermit`):
`only-waiting` counts the pods planned now, `waiting-and-running` those and the bound ones, and
the default `once-satisfied` the pods planned now, or none at all once any member of the group
has been bound (Koordinator marks the group resource-satisfied in `addBoundPod`). A
once-satisfied gang whose group has a bound member is *released*: as in Koordinator, where
PreFilter, Permit and PostFilter then let each member go on its own, its members are placed
one by one, every one that fits, whatever its mode (restarted workers of a running job come back
while any of them does not fit).

When the whole group does not fit, `fallback_pods` offers the smaller set that just reaches every
gang's min-available, so a gang with min-available < total can start with its minimum. A group
whose gangs are all NonStrict or released (`places_partially`) goes further, as Koordinator's
NonStrict mode lets each member schedule on its own: the framework places every member that
fits, whatever its name, as long as each gang reaches what Permit asks. A Strict group is
all-or-nothing: one member that does not fit rejects the group for the round and nothing of it
is kept (Koordinator's Strict mode rejects the whole gang group and releases its members'
reservations).

Args (CoschedulingArgs): `enablePreemption` is read and kept, but job-level preemption
(JobPreemption) runs whatever it says: with it false koord-scheduler still preempts pod by pod
through DefaultPreemption, which koordweb does a whole job at a time (docs/koordinator-compat.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from scheduler.causes import GANG_INCOMPLETE, GANG_SHORT
from scheduler.framework import Arg, Code, Handle, Plan, Status
from scheduler.model import GangInfo, JobInfo, PodInfo
from scheduler.state import CycleState
from scheduler.vocabulary import MATCH_ONCE_SATISFIED, MATCH_ONLY_WAITING


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


def _once_satisfied(state: CycleState, job: JobInfo) -> bool:
    """Whether any member of the group is bound (a finished one too: it was bound once)."""
    for key in job.pod_keys:
        pod = state.pods.get(key)
        if pod is not None and pod.is_bound:
            return True
    return False


def _released(gang: GangInfo, satisfied: bool) -> bool:
    return gang.match_policy == MATCH_ONCE_SATISFIED and satisfied


def _needed(gang: GangInfo, bound: int, satisfied: bool) -> int:
    """How many of the gang's members Permit still asks to be placed now."""
    if _released(gang, satisfied):
        return 0
    if gang.match_policy == MATCH_ONLY_WAITING or gang.match_policy == MATCH_ONCE_SATISFIED:
        return gang.min_available
    return max(0, gang.min_available - bound)  # waiting-and-running


class Coscheduling:
    name = "Coscheduling"
    extension_points = frozenset({"PreFilter", "Permit", "Fallback"})
    arguments: ClassVar[Mapping[str, Arg]] = {"enablePreemption": Arg("bool", default=False)}

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        # Per job of this round (a Framework, and so this plugin, lives for one round, and the
        # pods bound at its start do not change): whether every gang goes member by member.
        self._alone: dict[str, bool] = {}

    def pre_filter(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> Status:
        satisfied = _once_satisfied(state, job) if job.gangs else False
        self._alone[job.id] = bool(job.gangs) and all(
            g.mode == "NonStrict" or _released(g, satisfied) for g in job.gangs
        )
        counts = _gang_counts(state, job)
        for gang in job.gangs:
            if _released(gang, satisfied):
                continue  # Koordinator's PreEnqueue and PreFilter let such a member through
            exist, _bound = counts[gang.id]
            if exist < gang.min_available:
                return Status(
                    Code.WAIT,
                    f"gang {gang.id} has {exist} of min-available {gang.min_available} pods",
                    {"gang": gang.id, "pods": exist, "min_available": gang.min_available},
                    self.name,
                    GANG_INCOMPLETE,
                )
        return Status.success()

    def permit(self, state: CycleState, job: JobInfo, plan: Plan) -> Status:
        planned: dict[str | None, int] = {}
        for key in plan.assignment:
            gang_id = state.pods[key].gang_id
            planned[gang_id] = planned.get(gang_id, 0) + 1
        counts = _gang_counts(state, job)
        satisfied = _once_satisfied(state, job) if job.gangs else False
        for gang in job.gangs:
            bound = counts[gang.id][1]
            now = planned.get(gang.id, 0)
            if now < _needed(gang, bound, satisfied):
                counted = now if gang.match_policy != "waiting-and-running" else now + bound
                return Status(
                    Code.UNSCHEDULABLE,
                    f"gang {gang.id} would have {counted} of min-available {gang.min_available}"
                    + (f" (match-policy {gang.match_policy})" if bound else ""),
                    {
                        "gang": gang.id,
                        "reached": counted,
                        "min_available": gang.min_available,
                        "match_policy": gang.match_policy,
                    },
                    self.name,
                    GANG_SHORT,
                )
        return Status.success()

    def places_partially(self, job: JobInfo) -> bool:
        """NonStrict or released gangs: members that fit are placed without the rest."""
        if not job.gangs:
            return False
        if job.id in self._alone:  # known since PreFilter, which runs first
            return self._alone[job.id]
        return all(g.mode == "NonStrict" for g in job.gangs)

    def fallback_pods(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]
    ) -> list[PodInfo] | None:
        """The first pods (in placement order) that just reach what every gang's Permit asks."""
        if not job.gangs:
            return None
        counts = _gang_counts(state, job)
        satisfied = _once_satisfied(state, job)
        missing = {g.id: _needed(g, counts[g.id][1], satisfied) for g in job.gangs}
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
