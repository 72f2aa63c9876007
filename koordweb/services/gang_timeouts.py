"""Gang waiting time across rounds: writing down the gangs that let their nominated nodes go.

The engine decides (scheduler/nominations.py, from each pod's `nominated_at`); this service
clears the nominations of the timed-out jobs' pending pods and records the plain reason on the
job, which stays pending: back in the queue for the next round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from koordweb.models import Job, Pod, PodPhase


def gang_timeouts_record(*, timeouts: Mapping[str, str], jobs: Mapping[str, Sequence[Job]]) -> None:
    """For each engine job id in `timeouts` (its reason), the rows of `jobs[job_id]`."""
    for job_id, reason in sorted(timeouts.items()):
        rows = list(jobs.get(job_id, []))
        Pod.objects.filter(job__in=rows, node__isnull=True, phase=PodPhase.PENDING).update(
            nominated_node=None, nominated_at=None
        )
        for job in rows:
            job.state_reason = reason
            job.save(update_fields=["state_reason"])
