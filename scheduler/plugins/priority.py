"""PrioritySort plugin. Extension point: QueueSort.

Pending jobs go highest priority first, then in submission order, then by job id (the name
tie-break that keeps a round deterministic). Argument (a profile option, ours): `largestFirst`
(default false) puts, among jobs of equal priority, those asking for more first: a job's size is
the sum over its pending pods of each pod's dominant share (its largest request as a fraction of
the cluster's allocatable), so a gang of 8-GPU pods goes before one of 2-GPU pods. Large jobs
then find room before small ones fragment it, at the price of first-come first-served.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from scheduler.framework import Arg, Handle
from scheduler.model import PODS, JobInfo
from scheduler.state import CycleState


class PrioritySort:
    name = "PrioritySort"
    extension_points = frozenset({"QueueSort"})
    arguments: ClassVar[Mapping[str, Arg]] = {"largestFirst": Arg("bool")}

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = dict(args or {})
        self.largest_first = bool(self.args.get("largestFirst", False))

    def sort_key(self, state: CycleState, job: JobInfo) -> tuple[Any, ...]:
        size = -job_size(state, job) if self.largest_first else 0.0
        return (-job.priority, size, job.submission_order, job.id)


def job_size(state: CycleState, job: JobInfo) -> float:
    """The job's pending pods' dominant shares summed (see the module docstring)."""
    totals = state.totals()
    counted = totals > 0
    counted[state.resource_index[PODS]] = False
    shares: dict[int, float] = {}  # pods asking the same share one request row
    size = 0.0
    for pod in state.pending_pods(job):
        row = state.vector(pod)
        share = shares.get(id(row))
        if share is None:
            share = shares[id(row)] = float((row[counted] / totals[counted]).max(initial=0.0))
        size += share
    return size
