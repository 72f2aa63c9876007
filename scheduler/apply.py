"""Applying a round's decisions to a snapshot, for simulations and what-if questions.

`apply_round` returns the snapshot a perfectly obedient cluster would show next: placed pods bound
and Running, victims gone (evicted pods are removed, as their controller's replacements are new
pending pods outside this engine's knowledge), preemptors' pods nominated. `run_rounds` repeats
rounds until nothing changes, for the engine's scenario tests (`manage.py simulate` runs its rounds
through koordweb's round pipeline instead, on a scratch cluster's rows).
"""

from __future__ import annotations

from dataclasses import replace

from scheduler.model import ClusterSnapshot, PodInfo
from scheduler.profile import Profile
from scheduler.result import RoundResult
from scheduler.round import plan_round


def apply_round(
    snapshot: ClusterSnapshot, result: RoundResult, now: float | None = None
) -> ClusterSnapshot:
    evicted = {key for record in result.preemptions for key in record.victim_pods}
    nominated = {k: n for record in result.preemptions for k, n in record.nominations.items()}
    pods: list[PodInfo] = []
    for pod in snapshot.pods:
        if pod.key in evicted:
            continue
        placed = result.placements.get(pod.key)
        if placed is not None:
            annotations = {**pod.annotations, **placed.annotations}
            pod = replace(
                pod,
                node=placed.node,
                phase="Running",
                nominated_node=None,
                nominated_at=None,
                annotations=annotations,
            )
        elif pod.key in nominated:
            pod = replace(pod, nominated_node=nominated[pod.key], nominated_at=snapshot.now)
        elif pod.job_id in result.timeouts and pod.is_pending:
            pod = replace(pod, nominated_node=None, nominated_at=None)
        pods.append(pod)
    gone = evicted
    jobs = tuple(
        replace(job, pod_keys=tuple(k for k in job.pod_keys if k not in gone))
        for job in snapshot.jobs
    )
    jobs = tuple(job for job in jobs if job.pod_keys)
    return replace(
        snapshot,
        pods=tuple(pods),
        jobs=jobs,
        now=snapshot.now if now is None else now,
    )


def run_rounds(
    snapshot: ClusterSnapshot, profile: Profile | None = None, max_rounds: int = 10
) -> tuple[ClusterSnapshot, list[RoundResult]]:
    """Run rounds (applying each) until a round neither places nor preempts anything."""
    results: list[RoundResult] = []
    for _ in range(max_rounds):
        result = plan_round(snapshot, profile)
        results.append(result)
        if not result.placements and not result.preemptions:
            break
        snapshot = apply_round(snapshot, result)
    return snapshot, results
