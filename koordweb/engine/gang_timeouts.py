"""Gang waiting time across rounds: writing down the gangs that let their nominated nodes go.

The engine decides (scheduler/nominations.py, from each pod's `nominated_at`); this service
records the plain reason on the job, which stays pending: back in the queue for the next round.
The round gives the nominations up through its intents (records._nominations_given_up), so they
are cleared in the cluster too, not only in the database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from koordweb.models import Job


def gang_timeouts_record(*, timeouts: Mapping[str, str], jobs: Mapping[str, Sequence[Job]]) -> None:
    """For each engine job id in `timeouts` (its reason), the rows of `jobs[job_id]`."""
    for job_id, reason in sorted(timeouts.items()):
        for job in jobs.get(job_id, []):
            job.state_reason = reason
            job.save(update_fields=["state_reason"])
