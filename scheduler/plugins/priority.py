"""PrioritySort plugin. Extension point: QueueSort.

Pending jobs go highest priority first, then in submission order, then by job id (the name
tie-break that keeps a round deterministic). Arguments (profile options, ours):

- `sizeWindow` (a duration, default 5 minutes; "0s" is Koordinator's strict order): among equal
  priorities a job's queue time is moved earlier by at most this window, in proportion to its
  size: its pods' dominant share against the largest pods pending (the pods of a job asking
  for more go first, as in first-fit-decreasing packing), scaled from 3/4 to 1 by the job's total
  share against the largest pending job's. So a job is never overtaken by a job of its priority
  submitted more than the window after it: first come first served holds beyond the window.
- `largestFirst` (default false) puts, among jobs of equal priority, those asking for more first
  whenever they were submitted: a job's size is the sum over its pending pods of each pod's
  dominant share (its largest request as a fraction of the cluster's allocatable). Large jobs
  then find room before small ones fragment it, at the price of first come first served (it
  replaces the window).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from scheduler.framework import Arg, Handle
from scheduler.model import PODS, JobInfo
from scheduler.plugin_args import PluginArgs
from scheduler.state import CycleState
from scheduler.state_keys import StateKey

DEFAULT_SIZE_WINDOW = "5m"  # measured in docs/benchmarks.md ("A default that packs")


class PrioritySort:
    name = "PrioritySort"
    extension_points = frozenset({"QueueSort"})
    arguments: ClassVar[Mapping[str, Arg]] = {
        "largestFirst": Arg("bool", default=False),
        "sizeWindow": Arg("duration", default=DEFAULT_SIZE_WINDOW),
    }

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        read = PluginArgs(self.arguments, args)
        self.largest_first = read.flag("largestFirst")
        self.window = float(read.seconds("sizeWindow"))

    def sort_key(self, state: CycleState, job: JobInfo) -> tuple[Any, ...]:
        size = -job_size(state, job) if self.largest_first else 0.0
        order = job.submission_order
        if self.window and not self.largest_first:
            order -= self.window * size_ahead(state, job)
        return (-job.priority, size, order, job.submission_order, job.id)


@dataclass(frozen=True)
class JobSizes:
    """Each pending job's (pod, total) size, and the largest pod and total among them."""

    sizes: dict[str, tuple[float, float]]
    largest_pod: float
    largest_total: float


def job_sizes(state: CycleState) -> JobSizes:
    """Every pending job sized (the queue is sorted once a round, so each is sized once)."""
    shares: dict[int, float] = {}  # pods asking the same share one request row
    sizes = {j.id: pod_and_job_size(state, j, shares) for j in state.pending_jobs()}
    return JobSizes(
        sizes,
        max((p for p, _ in sizes.values()), default=0.0) or 1.0,
        max((t for _, t in sizes.values()), default=0.0) or 1.0,
    )


SIZES: StateKey[JobSizes] = StateKey("PrioritySort/sizes", job_sizes)


def size_ahead(state: CycleState, job: JobInfo) -> float:
    """How far ahead (a share of the window) a job's size moves it: its pods' share against the
    largest pods pending, scaled from 3/4 to 1 by its total share against the largest job's."""
    known = state.get_or_create(SIZES)
    pod, total = known.sizes.get(job.id) or pod_and_job_size(state, job, {})
    return pod / known.largest_pod * (3 + total / known.largest_total) / 4


def pod_and_job_size(
    state: CycleState, job: JobInfo, shares: dict[int, float]
) -> tuple[float, float]:
    """The largest dominant share among the job's pending pods, and their sum; `shares` keeps
    each request row's share (by the row's id) across the jobs of a round."""
    totals = state.totals()
    counted = totals > 0
    counted[state.resource_index[PODS]] = False
    largest = size = 0.0
    for pod in state.pending_pods(job):
        row = state.vector(pod)
        share = shares.get(id(row))
        if share is None:
            share = shares[id(row)] = float((row[counted] / totals[counted]).max(initial=0.0))
        largest = max(largest, share)
        size += share
    return largest, size


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
