"""ElasticQuota plugin. Extension points: Setup, PreFilter (admission), Reserve (quota usage),
RuntimeQuota (its ledger, which preemption reads through the Handle).

At the start of a round it computes every quota's runtime quota from the requests of bound and
pending pods (`scheduler.quota_tree`: mins scaled down when they outgrow the pool, the default and
system quotas and pods of no quota beside the tree). Admission, as Koordinator's PreFilter
(`elasticquota/plugin.go`), requires used + request <= runtime for the job's quota on the
dimensions it declares (min or max), and for its ancestors too only with `enableCheckParentQuota`
(off by default, as in Koordinator: a child's runtime is already its share of its parent's);
otherwise the job is rejected with `Insufficient quotas` naming the exceeded dimensions and the
shortfall, which the preemption plugin may resolve by in-quota preemption. Pods labelled
`quota.scheduling.koordinator.sh/preemptible=false` must also stay within the quota's min
(`Insufficient non-preemptible quotas`): nothing may evict them, so only the guarantee may hold
them. Reserve adds a placed job to `used` so later jobs in the round see it.

Args (ElasticQuotaArgs): `enableCheckParentQuota` (false), `enableMinQuotaScale` (true).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from scheduler.causes import NON_PREEMPTIBLE_QUOTA_INSUFFICIENT, QUOTA_INSUFFICIENT
from scheduler.framework import Arg, Code, Handle, Plan, ReserveResult, Status
from scheduler.model import JobInfo, PodInfo
from scheduler.plugin_args import PluginArgs
from scheduler.quota_tree import (
    QuotaTree,
    add_into,
    outside_used,
    quota_sums,
    runtime_quota,
    tree_total,
)
from scheduler.state import CycleState
from scheduler.state_keys import StateKey
from scheduler.vocabulary import QUOTA_PREEMPTIBLE

INSUFFICIENT = "Insufficient quotas"
INSUFFICIENT_NON_PREEMPTIBLE = "Insufficient non-preemptible quotas"


@dataclass
class QuotaBook:
    """Per-round quota accounting, kept under `QUOTA_BOOK` by the plugin's Setup."""

    tree: QuotaTree
    runtime: dict[str, dict[str, int]]
    used: dict[str, dict[str, int]]
    # The guaranteed min (scaled down when the mins outgrow the pool), per quota and resource.
    mins: dict[str, dict[str, int]] = field(default_factory=dict)
    # Use by non-preemptible pods (children rolled up), held to the declared min.
    non_preemptible: dict[str, dict[str, int]] = field(default_factory=dict)
    check_parents: bool = False

    def min_of(self, quota: str) -> Mapping[str, int]:
        declared = self.tree.quotas[quota].min
        scaled = self.mins.get(quota, {})
        return {r: scaled.get(r, int(v)) for r, v in declared.items()}

    def checked(self, quota: str) -> list[str]:
        """The quotas admission checks for a job of `quota`: it, and its ancestors when asked."""
        return self.tree.ancestors(quota) if self.check_parents else [quota]


QUOTA_BOOK: StateKey[QuotaBook] = StateKey("ElasticQuota/book")  # written by Setup


def quota_book(state: CycleState) -> QuotaBook | None:
    """The round's quota accounting (None without quotas)."""
    return state.read(QUOTA_BOOK)


def job_requests(pods: Sequence[PodInfo]) -> dict[str | None, dict[str, int]]:
    per_quota: dict[str | None, dict[str, int]] = {}
    for pod in pods:
        add_into(per_quota.setdefault(pod.quota, {}), pod.requests)
    return per_quota


def non_preemptible(pod: PodInfo) -> bool:
    """Koordinator's IsPodNonPreemptible: labelled preemptible=false (not the scheduling
    label that only keeps a pod from being a victim)."""
    return pod.labels.get(QUOTA_PREEMPTIBLE) == "false"


def non_preemptible_sums(tree: QuotaTree, pods: Sequence[PodInfo]) -> dict[str, dict[str, int]]:
    """Per quota (children rolled up), what its bound non-preemptible pods request."""
    return quota_sums(tree, [p for p in pods if non_preemptible(p)], include_pending=False)


def shortfall(
    book: QuotaBook, quota: str, request: Mapping[str, int], released: Mapping[str, int]
) -> dict[str, dict[str, int]]:
    """Per quota in the chain, how much each checked dimension would exceed runtime."""
    missing: dict[str, dict[str, int]] = {}
    for name in book.checked(quota):
        dims = book.tree.checked_dimensions(name)
        runtime, used = book.runtime[name], book.used[name]
        for r, v in request.items():
            if r not in dims or v <= 0:
                continue
            over = used.get(r, 0) - released.get(r, 0) + v - runtime.get(r, 0)
            if over > 0:
                missing.setdefault(name, {})[r] = over
    return missing


def non_preemptible_excess(book: QuotaBook, quota: str, request: Mapping[str, int]) -> list[str]:
    """The dimensions of its declared min that `quota`'s non-preemptible pods would exceed."""
    used = book.non_preemptible.get(quota, {})
    minimum = book.tree.quotas[quota].min  # the declared min, as Koordinator compares
    return sorted(
        r for r, v in minimum.items() if request.get(r, 0) > 0 and used.get(r, 0) + request[r] > v
    )


class ElasticQuota:
    name = "ElasticQuota"
    extension_points = frozenset({"Setup", "PreFilter", "Reserve", "RuntimeQuota"})
    arguments: ClassVar[Mapping[str, Arg]] = {
        "enableCheckParentQuota": Arg("bool", default=False),
        "enableMinQuotaScale": Arg("bool", default=True),
    }

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        read = PluginArgs(self.arguments, args)
        self.check_parents = read.flag("enableCheckParentQuota")
        self.scale_min = read.flag("enableMinQuotaScale")

    def runtime_quota(self, state: CycleState) -> QuotaBook | None:
        """This round's ledger (None without quotas), read by others through the Handle."""
        return quota_book(state)

    def setup(self, state: CycleState) -> None:
        if not state.snapshot.quotas:
            return
        pods = state.snapshot.pods
        tree = QuotaTree.build(state.snapshot.quotas)
        requests = quota_sums(tree, pods, include_pending=True)
        allocatable = {r: int(state.allocatable[:, i].sum()) for i, r in enumerate(state.resources)}
        total = tree_total(allocatable, outside_used(tree, pods))
        mins: dict[str, dict[str, int]] = {}
        runtime = runtime_quota(tree, requests, total, scale_min=self.scale_min, mins=mins)
        used = quota_sums(tree, pods, include_pending=False)
        book = QuotaBook(tree, runtime, used, mins, non_preemptible_sums(tree, pods))
        book.check_parents = self.check_parents
        state.write(QUOTA_BOOK, book)

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
                    QUOTA_INSUFFICIENT,
                )
            pinned = job_requests([p for p in pods if non_preemptible(p)]).get(quota)
            excess = non_preemptible_excess(book, quota, pinned) if pinned else []
            if excess:
                return Status(
                    Code.UNSCHEDULABLE,
                    f"{INSUFFICIENT_NON_PREEMPTIBLE}, quotaName: {quota},"
                    f" exceedDimensions: [{' '.join(excess)}]",
                    {
                        "quota": quota,
                        "exceeded_dimensions": excess,
                        "min": dict(book.tree.quotas[quota].min),
                        "non_preemptible_used": dict(book.non_preemptible.get(quota, {})),
                        "request": pinned,
                    },
                    self.name,
                    NON_PREEMPTIBLE_QUOTA_INSUFFICIENT,
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
                pinned = non_preemptible(pod)
                for name in book.tree.ancestors(pod.quota):
                    add_into(book.used[name], pod.requests, sign)
                    if pinned:
                        add_into(book.non_preemptible.setdefault(name, {}), pod.requests, sign)
