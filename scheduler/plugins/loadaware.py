"""LoadAware plugin. Extension points: Filter (slot-limit protocol), Score, Reserve.

Koordinator v1.7's LoadAwareScheduling (pkg/scheduler/plugins/loadaware) on NodeMetric reports.
A node's estimated usage is its report plus the assign cache (`loadaware_estimate`: bound pods the
report does not cover yet, at max(estimate - reported, 0)) plus this round's placements at their
estimate (max(limit, request) x scaling factor). Filter: a pod fits while round(estimated /
allocatable x 100) is within its threshold (0 turns a resource off), counting the job's own
earlier pods; the node annotation `scheduling.koordinator.sh/usage-thresholds` overrides per node.
Nodes without a report are not constrained; an expired one refuses the node ("node(s) nodeMetric
expired") while filterExpiredNodeMetrics, unless enableScheduleWhenNodeMetricsExpired. A
DaemonSet's pods pass the Filter whatever the node's load (`PodInfo.daemonset`). Prod pods
(Koordinator's priority class prod) are held to prodUsageThresholds, when set, on prod pods'
usage only; others to `aggregated.usageThresholds` on a percentile of the aggregated usage when
configured ("node(s) cpu aggregated usage exceed threshold"), else to usageThresholds. Score:
Koordinator's least-used score weighted by resourceWeights plus dominantResourceWeight x the
lowest one, on the aggregated score usage or prod usage when configured; 0 without a fresh report.
Args: Koordinator's LoadAwareSchedulingArgs names and v1.7 defaults (`arguments` below;
docs/koordinator-compat.md lists them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from scheduler.causes import AGGREGATED_LOAD_OVER_THRESHOLD, LOAD_OVER_THRESHOLD, METRIC_EXPIRED
from scheduler.framework import (
    Arg,
    BoolArray,
    FloatArray,
    Handle,
    IntArray,
    NodeCheck,
    Plan,
    Refusal,
    ReserveResult,
    Status,
)
from scheduler.model import CPU, MEMORY, JobInfo, NodeInfo, PodInfo
from scheduler.plugin_args import PluginArgs
from scheduler.plugins.loadaware_estimate import (
    aggregated_usage,
    assigned_estimate,
    estimate_pod,
    is_prod,
    prod_usage,
)
from scheduler.state import CycleState
from scheduler.state_keys import StateKey
from scheduler.vocabulary import ANNOTATION_USAGE_THRESHOLDS

DEFAULT_THRESHOLDS: Mapping[str, int] = {CPU: 65, MEMORY: 95}
DEFAULT_FACTORS: Mapping[str, int] = {CPU: 85, MEMORY: 70}
DEFAULT_WEIGHTS: Mapping[str, int] = {CPU: 1, MEMORY: 1}
DEFAULT_EXPIRATION_SECONDS = 180
REASON_EXPIRED = "node(s) nodeMetric expired"
AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")
_UNLIMITED = np.int64(1 << 40)


@dataclass
class LoadState:
    """Per-round arrays (nodes x resources), kept under the plugin's `LoadAware.key`."""

    resources: tuple[str, ...]
    allocatable: IntArray
    reported: IntArray
    placed: IntArray  # estimates of pods placed on each node this round
    thresholds: IntArray  # percent; 0 means no threshold for that resource
    fresh: BoolArray  # the node has a report that has not expired
    expired: BoolArray  # the node's report expired and the filter refuses it
    aged: BoolArray  # the node's report expired (scores 0 whatever the filter does)
    # The same for prod pods (prodUsageThresholds): prod pods' reported usage and estimates.
    prod_reported: IntArray
    prod_placed: IntArray
    prod_thresholds: IntArray
    # Aggregated (percentile) usage for `aggregated.usageThresholds`, and what scores read.
    agg_reported: IntArray
    agg_thresholds: IntArray
    score_reported: IntArray
    reserved: dict[str, list[tuple[int, IntArray, bool]]] = field(default_factory=dict)
    # Whether any node has a usable report / a refused expired one (set by setup): without
    # either, the filter and the score have nothing to say about any node.
    any_fresh: bool = False
    any_expired: bool = False
    # Estimates by pod key: each pod is estimated once a round.
    estimates: dict[str, IntArray] = field(default_factory=dict)


class LoadAware:
    name = "LoadAware"
    extension_points = frozenset({"Setup", "Filter", "Score", "Reserve"})
    # SetDefaults_LoadAwareSchedulingArgs: an empty map is the default map; given weights
    # replace the default ones, which apply only without a dominant weight; scaling factors
    # are merged over the defaults.
    arguments: ClassVar[Mapping[str, Arg]] = {
        "usageThresholds": Arg("per_resource", minimum=0, maximum=100, default=DEFAULT_THRESHOLDS),
        "estimatedScalingFactors": Arg("per_resource", minimum=1, maximum=100),
        "resourceWeights": Arg("per_resource", minimum=0, maximum=100),
        "dominantResourceWeight": Arg("int", minimum=0, maximum=100, default=0),
        "prodUsageThresholds": Arg("per_resource", minimum=0, maximum=100),
        "aggregated": Arg(
            "object",
            fields=(
                ("usageThresholds", Arg("per_resource", minimum=0, maximum=100)),
                ("usageAggregationType", Arg("choice", choices=AGGREGATION_TYPES, default="")),
                ("usageAggregatedDuration", Arg("duration")),
                ("scoreAggregationType", Arg("choice", choices=AGGREGATION_TYPES, default="")),
                ("scoreAggregatedDuration", Arg("duration")),
            ),
        ),
        "scoreAccordingProdUsage": Arg("bool", default=False),
        # v1.7 registers one estimator; an unknown name falls back to it (estimator/types.go).
        "estimator": Arg("choice", choices=("defaultEstimator", "")),
        "nodeMetricExpirationSeconds": Arg("int", minimum=1, default=DEFAULT_EXPIRATION_SECONDS),
        "filterExpiredNodeMetrics": Arg("bool", default=True),
        "enableScheduleWhenNodeMetricsExpired": Arg("bool", default=False),
        "estimatedSecondsAfterPodScheduled": Arg("int", minimum=0),
        "estimatedSecondsAfterInitialized": Arg("int", minimum=0),
    }

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        read = PluginArgs(self.arguments, args)
        self.thresholds = read.amounts("usageThresholds")
        self.prod_thresholds = read.amounts("prodUsageThresholds")
        self.score_prod = read.flag("scoreAccordingProdUsage")
        aggregated = read.object("aggregated")
        self.agg_thresholds = aggregated.amounts("usageThresholds")
        self.agg_type = aggregated.text("usageAggregationType")
        self.agg_seconds = aggregated.seconds("usageAggregatedDuration")
        # generateUsageThresholdsFilterProfile: aggregated thresholds need a type to apply.
        self.agg_filter = bool(self.agg_thresholds) and bool(self.agg_type)
        self.score_type = aggregated.text("scoreAggregationType")
        self.score_seconds = aggregated.seconds("scoreAggregatedDuration")
        self.factors = {**DEFAULT_FACTORS, **read.amounts("estimatedScalingFactors")}
        self.dominant_weight = read.integer("dominantResourceWeight")
        weights = read.amounts("resourceWeights")
        self.weights = weights or ({} if self.dominant_weight else dict(DEFAULT_WEIGHTS))
        self.expiration = float(read.integer("nodeMetricExpirationSeconds"))
        self.filter_expired = read.flag("filterExpiredNodeMetrics")
        self.schedule_when_expired = read.flag("enableScheduleWhenNodeMetricsExpired")
        self.after_scheduled: int | None = read.get("estimatedSecondsAfterPodScheduled")
        self.after_initialized: int | None = read.get("estimatedSecondsAfterInitialized")
        self.key: StateKey[LoadState] = StateKey(self.name, self._load_state)

    # --- setup ----------------------------------------------------------------------------------
    def setup(self, state: CycleState) -> None:
        state.write(self.key, self._load_state(state))

    def _load_state(self, state: CycleState) -> LoadState:
        resources = tuple(
            sorted(
                set(self.thresholds)
                | set(self.prod_thresholds)
                | set(self.agg_thresholds)
                | set(self.weights)
                | set(self.factors)
            )
        )
        n_nodes, n_res = len(state.nodes), len(resources)
        ls = LoadState(
            resources=resources,
            allocatable=np.zeros((n_nodes, n_res), dtype=np.int64),
            reported=np.zeros((n_nodes, n_res), dtype=np.int64),
            placed=np.zeros((n_nodes, n_res), dtype=np.int64),
            thresholds=np.zeros((n_nodes, n_res), dtype=np.int64),
            fresh=np.zeros(n_nodes, dtype=np.bool_),
            expired=np.zeros(n_nodes, dtype=np.bool_),
            aged=np.zeros(n_nodes, dtype=np.bool_),
            prod_reported=np.zeros((n_nodes, n_res), dtype=np.int64),
            prod_placed=np.zeros((n_nodes, n_res), dtype=np.int64),
            prod_thresholds=np.zeros((n_nodes, n_res), dtype=np.int64),
            agg_reported=np.zeros((n_nodes, n_res), dtype=np.int64),
            agg_thresholds=np.zeros((n_nodes, n_res), dtype=np.int64),
            score_reported=np.zeros((n_nodes, n_res), dtype=np.int64),
        )
        reported = [i for i, info in enumerate(state.nodes) if info.usage is not None]
        bound = self._bound_pods(state) if reported else {}
        now = state.snapshot.now
        for i in reported:
            info = state.nodes[i]
            assert info.usage is not None
            expired = self._is_expired(info, now)
            # An expired report is used as it is when the filter is told not to look at age.
            ls.fresh[i] = not expired or not self.filter_expired
            ls.expired[i] = expired and self.filter_expired and not self.schedule_when_expired
            ls.aged[i] = expired
            thresholds = self._node_thresholds(info)
            existing = assigned_estimate(
                info,
                bound.get(info.name, ()),
                self.factors,
                self.after_scheduled,
                self.after_initialized,
            )
            prod = self._prod_usage(info, bound.get(info.name, ()))
            node_usage = {r: int(v) for r, v in info.usage.items()}
            agg = self._aggregated(info, self.agg_type, self.agg_seconds, bound, existing)
            scored = self._aggregated(info, self.score_type, self.score_seconds, bound, existing)
            for j, r in enumerate(resources):
                ls.allocatable[i, j] = int(info.allocatable.get(r, 0))
                ls.reported[i, j] = node_usage.get(r, 0) + existing.get(r, 0)
                ls.thresholds[i, j] = thresholds.get(r, 0)
                ls.prod_reported[i, j] = prod.get(r, 0)
                ls.prod_thresholds[i, j] = self.prod_thresholds.get(r, 0)
                ls.agg_reported[i, j] = agg.get(r, 0) if agg else ls.reported[i, j]
                ls.agg_thresholds[i, j] = self.agg_thresholds.get(r, 0)
                ls.score_reported[i, j] = scored.get(r, 0) if scored else ls.reported[i, j]
        ls.any_fresh = bool(ls.fresh.any())
        ls.any_expired = bool(ls.expired.any())
        return ls

    @staticmethod
    def _bound_pods(state: CycleState) -> dict[str, list[PodInfo]]:
        bound: dict[str, list[PodInfo]] = {}
        for pod in state.snapshot.pods:
            if pod.consumes_node and not pod.terminating:
                assert pod.node is not None
                bound.setdefault(pod.node, []).append(pod)
        return bound

    def _prod_usage(self, info: NodeInfo, pods: Sequence[PodInfo]) -> dict[str, int]:
        if not self.prod_thresholds and not self.score_prod:
            return {}
        return prod_usage(info, pods, self.factors, self.after_scheduled, self.after_initialized)

    def _aggregated(
        self,
        info: NodeInfo,
        kind: str,
        seconds: int,
        bound: Mapping[str, Sequence[PodInfo]],
        existing: Mapping[str, int],
    ) -> dict[str, int] | None:
        if not kind:
            return None
        pods = bound.get(info.name, ())
        return aggregated_usage(info, kind, seconds, pods, existing, self.factors)

    def _view(self, pods: Sequence[PodInfo]) -> str:
        """Which usage and thresholds hold a job's pods: prod pods' when prodUsageThresholds are
        set and the pods are prod, else the aggregated ones when configured, else the node's."""
        if self.prod_thresholds and pods and is_prod(pods[0]):
            return "prod"
        return "aggregated" if self.agg_filter else "node"

    def _is_expired(self, info: NodeInfo, now: float) -> bool:
        # isNodeMetricExpired: at least the expiration old. (Stored reports always have a time;
        # a NodeInfo built without one is taken as current.)
        reported_at = info.usage_reported_at
        return reported_at is not None and now - reported_at >= self.expiration

    def _node_thresholds(self, info: NodeInfo) -> dict[str, int]:
        """The node's own `usageThresholds` replace the plugin's whole (Koordinator's
        generateUsageThresholdsFilterProfile): a resource they leave out is not checked there."""
        raw = info.annotations.get(ANNOTATION_USAGE_THRESHOLDS)
        if not raw:
            return self.thresholds
        try:
            custom = json.loads(raw).get("usageThresholds") or {}
            return {str(k): int(v) for k, v in custom.items()} if custom else self.thresholds
        except (ValueError, AttributeError, TypeError):
            return self.thresholds  # a malformed annotation falls back to the defaults

    # --- estimates ------------------------------------------------------------------------------
    def estimate(self, ls: LoadState, pod: PodInfo) -> IntArray:
        """The pod's estimated usage per resource (Koordinator's default estimator)."""
        vec = ls.estimates.get(pod.key)
        if vec is None:
            estimate = estimate_pod(pod, self.factors)
            vec = np.array([estimate.get(r, 0) for r in ls.resources], dtype=np.int64)
            ls.estimates[pod.key] = vec
        return vec

    def estimated_usage(
        self, ls: LoadState, node_indices: IntArray, view: str = "node"
    ) -> IntArray:
        """Reported usage with the assign cache, plus the estimates of pods placed this round
        (no report covers them yet, so their whole estimate counts). `view`: "node", "prod"
        (prod pods' only), "aggregated" (percentile usage) or "score" (what scores read)."""
        if view == "prod":
            prod_used: IntArray = ls.prod_reported[node_indices] + ls.prod_placed[node_indices]
            return prod_used
        reported = {"aggregated": ls.agg_reported, "score": ls.score_reported}.get(
            view, ls.reported
        )
        result: IntArray = reported[node_indices] + ls.placed[node_indices]
        return result

    @staticmethod
    def _limits(ls: LoadState, view: str) -> IntArray:
        return {"prod": ls.prod_thresholds, "aggregated": ls.agg_thresholds}.get(
            view, ls.thresholds
        )

    # --- Filter ---------------------------------------------------------------------------------
    def slot_limits(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> IntArray | None:
        if pods and all(pod.daemonset for pod in pods):
            return None  # Koordinator's Filter lets a DaemonSet's pods through (isDaemonSetPod)
        ls = self._state(state)
        if not ls.any_fresh and not ls.any_expired:
            return None
        if not ls.fresh[node_indices].any() and not ls.expired[node_indices].any():
            return None
        view = self._view(pods)
        used = self.estimated_usage(ls, node_indices, view)
        slots: IntArray = np.zeros(len(node_indices), dtype=np.int64)
        for estimate, count in self._runs(ls, pods):
            fit = self._fit(ls, node_indices, used, estimate, count, view)
            slots += fit
            used = used + fit[:, None] * estimate[None, :]
        fresh = ls.fresh[node_indices]
        slots[~fresh] = len(pods)
        slots[ls.expired[node_indices]] = 0
        return slots

    def node_checks(
        self, state: CycleState, on_node: Mapping[int, Sequence[PodInfo]]
    ) -> Mapping[int, NodeCheck]:
        """None: reported usage does not drop within a round when victims are chosen (their
        pods still run until deleted), so evicting never changes this Filter's count."""
        return {}

    def _fit(
        self,
        ls: LoadState,
        node_indices: IntArray,
        used: IntArray,
        estimate: IntArray,
        count: int,
        view: str = "node",
    ) -> IntArray:
        # Pod k fits while round(100 * (used + k * est) / alloc) <= threshold, i.e. while
        # 200 * (used + k * est) < (2 * threshold + 1) * alloc.
        fit = np.full(len(node_indices), count, dtype=np.int64)
        alloc = ls.allocatable[node_indices]
        limit = self._limits(ls, view)[node_indices]
        for j in range(len(ls.resources)):
            checked = (limit[:, j] > 0) & (alloc[:, j] > 0)
            room = (2 * limit[:, j] + 1) * alloc[:, j] - 200 * used[:, j]
            if estimate[j] > 0:
                k = np.where(room > 0, (room - 1) // (200 * estimate[j]), 0)
            else:
                k = np.where(room > 0, _UNLIMITED, 0)
            np.minimum(fit, np.where(checked, k, _UNLIMITED), out=fit)
        result: IntArray = np.maximum(fit, 0)
        return result

    def _runs(self, ls: LoadState, pods: Sequence[PodInfo]) -> list[tuple[IntArray, int]]:
        runs: list[tuple[IntArray, int]] = []
        for pod in pods:
            estimate = self.estimate(ls, pod)
            if runs and np.array_equal(runs[-1][0], estimate):
                runs[-1] = (runs[-1][0], runs[-1][1] + 1)
            else:
                runs.append((estimate, 1))
        return runs

    def explain(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> dict[Refusal, int]:
        ls = self._state(state)
        if not pods or len(node_indices) == 0 or not (ls.any_fresh or ls.any_expired):
            return {}
        if all(pod.daemonset for pod in pods):
            return {}
        expired = int(ls.expired[node_indices].sum())
        reasons = {Refusal(METRIC_EXPIRED, REASON_EXPIRED): expired} if expired else {}
        if not ls.fresh[node_indices].any():
            return reasons  # only nodes with fresh metrics are ever over a threshold
        estimate = self.estimate(ls, pods[0])
        view = self._view(pods)
        used = self.estimated_usage(ls, node_indices, view) + estimate[None, :]
        alloc = ls.allocatable[node_indices]
        limit = self._limits(ls, view)[node_indices]
        over = (limit > 0) & (alloc > 0) & (200 * used >= (2 * limit + 1) * alloc)
        over &= ls.fresh[node_indices][:, None]
        # Koordinator reports the first resource over its threshold.
        first = np.argmax(over, axis=1)[over.any(axis=1)]
        counts = np.bincount(first, minlength=len(ls.resources))
        aggregated = view == "aggregated"
        what = "aggregated usage" if aggregated else "usage"
        code = AGGREGATED_LOAD_OVER_THRESHOLD if aggregated else LOAD_OVER_THRESHOLD
        return reasons | {
            Refusal(code, f"node(s) {r} {what} exceed threshold", r): int(counts[j])
            for j, r in enumerate(ls.resources)
            if counts[j]
        }

    # --- Score ----------------------------------------------------------------------------------
    def score_nodes(self, state: CycleState, job: JobInfo, node_indices: IntArray) -> FloatArray:
        ls = self._state(state)
        scores: FloatArray = np.zeros(len(node_indices), dtype=np.float64)
        if not ls.any_fresh:
            return scores
        fresh = np.flatnonzero(ls.fresh[node_indices] & ~ls.aged[node_indices])
        pods = state.pending_pods(job)
        if not pods or len(fresh) == 0:
            return scores
        fresh_nodes = node_indices[fresh]
        view = "prod" if self.score_prod and is_prod(pods[0]) else "score"
        used = self.estimated_usage(ls, fresh_nodes, view) + self.estimate(ls, pods[0])[None, :]
        alloc = ls.allocatable[fresh_nodes]
        # loadAwareSchedulingScorer: weighted least-used scores (integers 0..100), plus the
        # dominant weight times the lowest of them.
        total: IntArray = np.zeros(len(fresh_nodes), dtype=np.int64)
        dominant: IntArray = np.full(len(fresh_nodes), 100, dtype=np.int64)
        weight_sum = self.dominant_weight
        for j, r in enumerate(ls.resources):
            weight = self.weights.get(r, 0)
            if not weight:
                continue
            capacity = alloc[:, j]
            least_used = np.where(
                (capacity > 0) & (used[:, j] <= capacity),
                (capacity - used[:, j]) * 100 // np.maximum(capacity, 1),
                0,
            )
            total += weight * least_used
            weight_sum += weight
            np.minimum(dominant, least_used, out=dominant)
        if weight_sum <= 0:
            return scores
        total += dominant * self.dominant_weight
        scores[fresh] = total // weight_sum
        return scores

    # --- Reserve --------------------------------------------------------------------------------
    def reserve(self, state: CycleState, job: JobInfo, plan: Plan) -> ReserveResult:
        ls = self._state(state)
        added: list[tuple[int, IntArray, bool]] = []
        for key, idx in plan.assignment.items():
            if not ls.fresh[idx]:
                # Only nodes with a usable report read what is placed on them (`fresh`, fixed
                # for the round): elsewhere the filter and the score never look.
                continue
            pod = state.pods[key]
            estimate = self.estimate(ls, pod)
            prod = is_prod(pod)
            ls.placed[idx] += estimate
            if prod:
                ls.prod_placed[idx] += estimate
            added.append((idx, estimate, prod))
        ls.reserved[job.id] = added
        return ReserveResult(Status.success())

    def unreserve(self, state: CycleState, job: JobInfo, plan: Plan) -> None:
        ls = self._state(state)
        for idx, estimate, prod in ls.reserved.pop(job.id, []):
            ls.placed[idx] -= estimate
            if prod:
                ls.prod_placed[idx] -= estimate

    def _state(self, state: CycleState) -> LoadState:
        return state.get_or_create(self.key)
