"""A job's state from its pods has one rule, used by the rounds and by an imported dump.

The two copies disagreed: the rounds sent a running job with one pod finished back to Scheduled,
and the import called a gang Scheduled only when every pod was bound, not `min_available`."""

from __future__ import annotations

from collections import Counter

import pytest

from koordweb.models import JobState, PodPhase, job_state_from_pods

RUNNING, SUCCEEDED, FAILED, PENDING = (
    PodPhase.RUNNING,
    PodPhase.SUCCEEDED,
    PodPhase.FAILED,
    PodPhase.PENDING,
)


@pytest.mark.parametrize(
    ("phases", "bound", "min_available", "current", "expected"),
    [
        ({SUCCEEDED: 4}, 4, 4, JobState.RUNNING, JobState.SUCCEEDED),
        ({RUNNING: 3, FAILED: 1}, 4, 4, JobState.RUNNING, JobState.FAILED),
        ({RUNNING: 4}, 4, 4, JobState.SCHEDULED, JobState.RUNNING),
        # one worker finished first: the job is still running, not back to Scheduled
        ({RUNNING: 3, SUCCEEDED: 1}, 3, 4, JobState.RUNNING, JobState.RUNNING),
        # the gang's minimum is bound, the rest still pending: the gang started
        ({PENDING: 6}, 4, 4, JobState.PENDING, JobState.SCHEDULED),
        ({PENDING: 6}, 3, 4, JobState.PENDING, JobState.PENDING),
        ({}, 0, 1, JobState.PENDING, JobState.PENDING),
    ],
)
def test_job_state_from_pods(
    phases: dict[str, int], bound: int, min_available: int, current: str, expected: str
) -> None:
    assert job_state_from_pods(Counter(phases), bound, min_available, current) == expected
