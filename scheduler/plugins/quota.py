"""ElasticQuota plugin. Extension points: Setup, PreFilter (admission), Reserve (quota usage),
RuntimeQuota (its ledger, which preemption reads through the Handle).

At the start of a round it computes every quota's runtime quota from the requests of bound and
pending pods (`scheduler.quota_tree`). Admission requires used + request <= runtime for the job's
quota and each of its ancestors, on the dimensions the quota declares (min or max); otherwise the
job is rejected with `Insufficient quotas` naming the exceeded dimensions and the shortfall, which
the preemption plugin may resolve by in-quota preemption. Reserve adds a placed job to `used` so
later jobs in the round see it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.framework import Code, Handle, Plan, ReserveResult, Status
from scheduler.model import JobInfo, PodInfo
from scheduler.quota_tree import QuotaTree, add_into, quota_sums, runtime_quota
from scheduler.state import CycleState

INSUFFICIENT = "Insufficient quotas"


@dataclass
class QuotaBook:
    """Per-round quota accounting kept in `state.plugin_data["ElasticQuota"]`."""

    tree: QuotaTree
    runtime: dict[str, dict[str, int]]
    used: dict[str, dict[str, int]]

    def min_of(self, quota: str) -> Mapping[str, int]:
        return self.tree.quotas[quota].min


def quota_book(state: CycleState) -> QuotaBook | None:
    book = state.plugin_data.get(ElasticQuota.name)
    return book if isinstance(book, QuotaBook) else None


def job_requests(pods: Sequence[PodInfo]) -> dict[str | None, dict[str, int]]:
    per_quota: dict[str | None, dict[str, int]] = {}
    for pod in pods:
        add_into(per_quota.setdefault(pod.quota, {}), pod.requests)
    return per_quota


def shortfall(
    book: QuotaBook, quota: str, request: Mapping[str, int], released: Mapping[str, int]
) -> dict[str, dict[str, int]]:
    """Per quota in the chain, how much each checked dimension would exceed runtime."""
    missing: dict[str, dict[str, int]] = {}
    for name in book.tree.ancestors(quota):
        dims = book.tree.checked_dimensions(name)
        runtime, used = book.runtime[name], book.used[name]
        for r, v in request.items():
            if r not in dims or v <= 0:
                continue
            over = used.get(r, 0) - released.get(r, 0) + v - runtime.get(r, 0)
            if over > 0:
                missing.setdefault(name, {})[r] = over
    return missing


class ElasticQuota:
    name = "ElasticQuota"
    extension_points = frozenset({"Setup", "PreFilter", "Reserve", "RuntimeQuota"})

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = dict(args or {})

    def runtime_quota(self, state: CycleState) -> QuotaBook | None:
        """This round's ledger (None without quotas), read by others through the Handle."""
        return quota_book(state)

    def setup(self, state: CycleState) -> None:
        if not state.snapshot.quotas:
            return
        tree = QuotaTree.build(state.snapshot.quotas)
        requests = quota_sums(tree, state.snapshot.pods, include_pending=True)
        total = {r: int(state.allocatable[:, i].sum()) for i, r in enumerate(state.resources)}
        book = QuotaBook(tree, runtime_quota(tree, requests, total), {})
        book.used = quota_sums(tree, state.snapshot.pods, include_pending=False)
        state.plugin_data[self.name] = book

    def pre_filter(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> Status:
        book = quota_book(state)
        if book is None:
            return Status.success()
        for quota, request in job_requests(pods).items():
            if quota is None or quota not in book.tree.quotas:
                continue
            missing = shortfall(book, quota, request, {})
            if missing:
                dims = sorted({r for per in missing.values() for r in per})
                return Status(
                    Code.UNSCHEDULABLE,
                    f"{INSUFFICIENT}, quotaName: {quota}, exceedDimensions: [{' '.join(dims)}]",
                    {
                        "quota": quota,
                        "exceeded_dimensions": dims,
                        "quota_shortfall": missing,
                        "runtime": dict(book.runtime[quota]),
                        "used": dict(book.used[quota]),
                        "request": request,
                    },
                    self.name,
                    "QuotaInsufficient",
                )
        return Status.success()

    def reserve(self, state: CycleState, job: JobInfo, plan: Plan) -> ReserveResult:
        self._account(state, plan, +1)
        return ReserveResult()

    def unreserve(self, state: CycleState, job: JobInfo, plan: Plan) -> None:
        self._account(state, plan, -1)

    def _account(self, state: CycleState, plan: Plan, sign: int) -> None:
        book = quota_book(state)
        if book is None:
            return
        for key in plan.assignment:
            pod = state.pods[key]
            if pod.quota in book.tree.quotas:
                for name in book.tree.ancestors(pod.quota):
                    add_into(book.used[name], pod.requests, sign)
