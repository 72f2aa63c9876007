"""`plan_round`: one scheduling round over a snapshot, pure and deterministic.

Pending jobs go in queue order; each is placed whole (later jobs see it) or not at all. A job that
does not fit goes to PostFilter (job-level preemption); every job not placed gets a structured
verdict and, when the preemption plugin can find one, a counterfactual ("fits if these jobs were
evicted" or "needs this much more quota"). A verdict carries its `Cause` (code, plugin, numbers,
per-node reasons, each as the plugin that gave it coded it: `scheduler.causes`) beside the text,
and the preemption plugin's answer its code and numbers; a preemption its rule and the cause of
the failure it answers; the result the runtime quota the quota plugin computed for the round, and
the queue: the jobs in the order the round took them.
"""

from __future__ import annotations

from typing import Any

from scheduler.causes import failure_cause
from scheduler.collector import collector_paused
from scheduler.cycle import Framework, JobOutcome
from scheduler.framework import Code
from scheduler.model import ClusterSnapshot
from scheduler.profile import Profile
from scheduler.result import (
    JobVerdict,
    Placement,
    PreemptionRecord,
    RoundResult,
)
from scheduler.state import CycleState


def plan_round(snapshot: ClusterSnapshot, profile: Profile | None = None) -> RoundResult:
    with collector_paused():  # see `scheduler.collector`
        return _plan_round(snapshot, profile)


def _plan_round(snapshot: ClusterSnapshot, profile: Profile | None) -> RoundResult:
    framework = Framework(profile or Profile.default())
    state = CycleState(snapshot)
    framework.start(state)
    ledger = framework.runtime_quota(state)
    runtime = {q: dict(r) for q, r in sorted(ledger.runtime.items())} if ledger else {}
    pending = state.pending_jobs()
    pending_pods = sum(len(state.pending_pods(job)) for job in pending)
    placements: dict[str, Placement] = {}
    decisions: dict[str, dict[str, Any]] = {}
    preemptions: list[PreemptionRecord] = []
    unschedulable: dict[str, JobVerdict] = {}
    queue: list[str] = []
    for job in framework.sort(state, pending):
        pods = state.pending_pods(job)
        if not pods:
            continue
        queue.append(job.id)
        with state.lower_reservations_released(job.priority):
            outcome = framework.schedule(state, job, pods)
            if outcome.plan is None:
                verdict, record = _not_placed(framework, state, outcome)
        if outcome.plan is not None:
            for key, idx in outcome.plan.assignment.items():
                alloc = outcome.allocations.get(key)
                placements[key] = Placement(
                    state.node_names[idx],
                    dict(alloc.devices) if alloc else {},
                    dict(alloc.annotations) if alloc else {},
                )
            decisions[job.id] = dict(outcome.plan.decision)
            continue
        if job.id in state.nomination_timeouts:
            timeout = state.nomination_timeouts[job.id]
            verdict = JobVerdict(
                verdict.code, verdict.reason, {**verdict.details, "timeout": timeout}
            )
        unschedulable[job.id] = verdict
        if record is not None:
            preemptions.append(record)
            state.hold_nominations(job.id, record.nominations, job.priority)
    tree = state.topology
    return RoundResult(
        placements=placements,
        preemptions=tuple(preemptions),
        unschedulable=unschedulable,
        decisions=decisions,
        outside_topology=tuple(
            n for n, out in zip(state.node_names, tree.outside, strict=True) if out
        ),
        metrics={
            "jobs_considered": len(pending),
            "jobs_placed": len(decisions),
            "pods_placed": len(placements),
            "pending_pods": pending_pods,
            "preemptions": len(preemptions),
        },
        timeouts=dict(state.nomination_timeouts),
        runtime_quota=runtime,
        queue=tuple(queue),
    )


def _not_placed(
    framework: Framework, state: CycleState, outcome: JobOutcome
) -> tuple[JobVerdict, PreemptionRecord | None]:
    assert outcome.failure is not None
    status = outcome.failure.status
    details: dict[str, Any] = dict(status.details)
    if status.plugin:
        details["plugin"] = status.plugin
    details["cause"] = failure_cause(outcome.failure, len(state.pending_pods(outcome.job)))
    record: PreemptionRecord | None = None
    code = status.code
    if status.code is Code.UNSCHEDULABLE:
        for plugin in framework.post_filters:
            # the job's own nominated reservations are room it may use, not room to preempt for
            held = state.release_reservations(outcome.job.id)
            try:
                result = plugin.post_filter(state, outcome.job, outcome.failure)
            finally:
                state.restore_reservations(outcome.job.id, held)
            details["preemption"] = {
                "status": result.status.code.value,
                "reason": result.status.reason,
                "cause": result.status.cause or result.status.code.value,
                "values": dict(result.status.values),
            }
            details.update(
                {k: v for k, v in result.status.details.items() if k == "counterfactual"}
            )
            if result.victim_job_ids:
                code = Code.WAIT
                record = PreemptionRecord(
                    preemptor=outcome.job.id,
                    victim_jobs=result.victim_job_ids,
                    victim_pods=result.victim_pod_keys,
                    nominations=dict(result.nominations),
                    reason=status.reason,
                    cost=dict(result.cost),
                    rule=result.rule,
                    cause=details["cause"],
                )
                details["nominations"] = dict(result.nominations)
                break
            if result.status.code is Code.WAIT:
                code = Code.WAIT
    return JobVerdict(code.value, status.reason, details), record
