"""Gang waiting time across rounds: a gang that holds nominations longer than it may wait lets go.

Koordinator gives a gang `gang.scheduling.koordinator.sh/waiting-time` (PodGroup
`scheduleTimeoutSeconds`, default 600 s) to gather: past it, the members waiting in Permit are
rejected and their reservations released (pkg/scheduler/plugins/coscheduling/core/gang.go). In a
round-based engine what a gang holds between rounds is its nominated nodes (after a preemption);
`timed_out_jobs` finds the gang groups whose earliest pending nomination is at least the shortest
member waiting time old on the snapshot's clock (`PodInfo.nominated_at`, from the database), so
the round does not hold their nodes and reports the timeout in plain words.
"""

from __future__ import annotations

from scheduler.model import ClusterSnapshot


def timed_out_jobs(snapshot: ClusterSnapshot) -> dict[str, str]:
    """Job id -> why it gave up its nominated nodes, for every gang past its waiting time."""
    nominated_since: dict[str, float] = {}
    for pod in snapshot.pods:
        if pod.is_pending and pod.nominated_node and pod.nominated_at is not None:
            earliest = nominated_since.get(pod.job_id)
            if earliest is None or pod.nominated_at < earliest:
                nominated_since[pod.job_id] = pod.nominated_at
    if not nominated_since:
        return {}
    timed_out: dict[str, str] = {}
    for job in snapshot.jobs:
        since = nominated_since.get(job.id)
        if since is None or not job.gangs:
            continue
        limit = min(gang.waiting_seconds for gang in job.gangs)
        waited = snapshot.now - since
        if limit > 0 and waited >= limit:
            timed_out[job.id] = (
                f"Gave up the nodes kept for it after waiting {int(waited)} s for the whole gang"
                f" to fit (its waiting time is {limit} s); it is back in the queue."
            )
    return timed_out
