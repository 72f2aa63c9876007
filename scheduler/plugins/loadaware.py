"""LoadAware plugin. Extension points: Filter (slot-limit protocol), Score, Reserve.

Koordinator's LoadAwareScheduling on NodeMetric reports (`NodeInfo.usage`, reported at
`NodeInfo.usage_reported_at` seconds on the snapshot's clock). A node's estimated usage is what it
reported plus, for every pod placed on it this round (the report cannot show them yet),
max(estimate - reported, 0) with estimate = request x factor (cpu 85%, memory 70%; a request of
zero counts as 250m / 200Mi). Filter: a pod fits while round(estimated / allocatable x 100) stays
within the threshold (cpu 65%, memory 95%, overridable per node by the annotation
`scheduling.koordinator.sh/usage-thresholds` `{"usageThresholds": {"cpu": 70}}`), counting the
job's own earlier pods on the node. Nodes without a report, or whose report is older than
`nodeMetricExpirationSeconds` (180), skip the filter as in Koordinator. Score: the weighted free
fraction of allocatable after the estimate (0..100); 0 for nodes without a fresh report.
Args (Koordinator's names): usageThresholds, estimatedScalingFactors, resourceWeights,
nodeMetricExpirationSeconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from scheduler.framework import (
    Arg,
    BoolArray,
    FloatArray,
    IntArray,
    NodeCheck,
    Plan,
    ReserveResult,
    Status,
)
from scheduler.model import CPU, MEMORY, JobInfo, NodeInfo, PodInfo
from scheduler.state import CycleState

ANNOTATION_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"
DEFAULT_THRESHOLDS: Mapping[str, int] = {CPU: 65, MEMORY: 95}
DEFAULT_FACTORS: Mapping[str, int] = {CPU: 85, MEMORY: 70}
DEFAULT_WEIGHTS: Mapping[str, int] = {CPU: 1, MEMORY: 1}
# What kube-scheduler assumes for a container that requests nothing.
DEFAULT_REQUESTS: Mapping[str, int] = {CPU: 250, MEMORY: 200 * 1024 * 1024}
DEFAULT_EXPIRATION_SECONDS = 180
_UNLIMITED = np.int64(1 << 40)


@dataclass
class LoadState:
    """Per-round arrays (nodes x resources), in `state.plugin_data["LoadAware"]`."""

    resources: tuple[str, ...]
    allocatable: IntArray
    reported: IntArray
    placed: IntArray  # estimates of pods placed on each node this round
    thresholds: IntArray  # percent; 0 means no threshold for that resource
    fresh: BoolArray  # the node has a report that has not expired
    reserved: dict[str, list[tuple[int, IntArray]]] = field(default_factory=dict)


class LoadAware:
    name = "LoadAware"
    extension_points = frozenset({"Filter", "Score", "Reserve"})
    arguments: ClassVar[Mapping[str, Arg]] = {
        "usageThresholds": Arg("per_resource", minimum=0, maximum=100),
        "estimatedScalingFactors": Arg("per_resource", minimum=1, maximum=100),
        "resourceWeights": Arg("per_resource", minimum=0, maximum=100),
        "nodeMetricExpirationSeconds": Arg("int", minimum=1),
    }

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args = dict(args or {})
        self.thresholds = {**DEFAULT_THRESHOLDS, **self.args.get("usageThresholds", {})}
        self.factors = {**DEFAULT_FACTORS, **self.args.get("estimatedScalingFactors", {})}
        self.weights = {**DEFAULT_WEIGHTS, **self.args.get("resourceWeights", {})}
        self.expiration = float(
            self.args.get("nodeMetricExpirationSeconds", DEFAULT_EXPIRATION_SECONDS)
        )

    # --- setup ----------------------------------------------------------------------------------
    def setup(self, state: CycleState) -> None:
        resources = tuple(sorted(set(self.thresholds) | set(self.weights) | set(self.factors)))
        n_nodes, n_res = len(state.nodes), len(resources)
        ls = LoadState(
            resources=resources,
            allocatable=np.zeros((n_nodes, n_res), dtype=np.int64),
            reported=np.zeros((n_nodes, n_res), dtype=np.int64),
            placed=np.zeros((n_nodes, n_res), dtype=np.int64),
            thresholds=np.zeros((n_nodes, n_res), dtype=np.int64),
            fresh=np.zeros(n_nodes, dtype=np.bool_),
        )
        for i, info in enumerate(state.nodes):
            ls.fresh[i] = self._is_fresh(info, state.snapshot.now)
            thresholds = self._node_thresholds(info)
            for j, r in enumerate(resources):
                ls.allocatable[i, j] = int(info.allocatable.get(r, 0))
                ls.reported[i, j] = int((info.usage or {}).get(r, 0))
                ls.thresholds[i, j] = thresholds.get(r, 0)
        state.plugin_data[self.name] = ls

    def _is_fresh(self, info: NodeInfo, now: float) -> bool:
        if info.usage is None:
            return False
        reported_at = getattr(info, "usage_reported_at", None)
        return reported_at is None or now - float(reported_at) <= self.expiration

    def _node_thresholds(self, info: NodeInfo) -> dict[str, int]:
        raw = info.annotations.get(ANNOTATION_USAGE_THRESHOLDS)
        if not raw:
            return self.thresholds
        try:
            custom = json.loads(raw).get("usageThresholds") or {}
            return {**self.thresholds, **{str(k): int(v) for k, v in custom.items()}}
        except (ValueError, AttributeError, TypeError):
            return self.thresholds  # a malformed annotation falls back to the defaults

    # --- estimates ------------------------------------------------------------------------------
    def estimate(self, ls: LoadState, pod: PodInfo) -> IntArray:
        """The pod's estimated usage per resource: request x factor, rounded half up."""
        vec = np.zeros(len(ls.resources), dtype=np.int64)
        for j, r in enumerate(ls.resources):
            factor = self.factors.get(r, 0)
            request = int(pod.requests.get(r, 0)) or DEFAULT_REQUESTS.get(r, 0)
            vec[j] = (request * factor * 2 + 100) // 200
        return vec

    def estimated_usage(self, ls: LoadState, node_indices: IntArray) -> IntArray:
        """Reported usage plus the estimates of pods placed this round.

        Koordinator adds max(estimate - the pod's reported usage, 0) for recently placed pods; a
        pod placed this round has no reported usage yet, so its whole estimate counts.
        """
        result: IntArray = ls.reported[node_indices] + ls.placed[node_indices]
        return result

    # --- Filter ---------------------------------------------------------------------------------
    def slot_limits(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> IntArray | None:
        ls = self._state(state)
        if not ls.fresh[node_indices].any():
            return None
        used = self.estimated_usage(ls, node_indices)
        slots: IntArray = np.zeros(len(node_indices), dtype=np.int64)
        for estimate, count in self._runs(ls, pods):
            fit = self._fit(ls, node_indices, used, estimate, count)
            slots += fit
            used = used + fit[:, None] * estimate[None, :]
        fresh = ls.fresh[node_indices]
        slots[~fresh] = len(pods)
        return slots

    def node_checks(
        self, state: CycleState, on_node: Mapping[int, Sequence[PodInfo]]
    ) -> Mapping[int, NodeCheck]:
        """None: reported usage does not drop within a round when victims are chosen (their
        pods still run until deleted), so evicting never changes this Filter's count."""
        return {}

    def _fit(
        self, ls: LoadState, node_indices: IntArray, used: IntArray, estimate: IntArray, count: int
    ) -> IntArray:
        # Pod k fits while round(100 * (used + k * est) / alloc) <= threshold, i.e. while
        # 200 * (used + k * est) < (2 * threshold + 1) * alloc.
        fit = np.full(len(node_indices), count, dtype=np.int64)
        alloc = ls.allocatable[node_indices]
        limit = ls.thresholds[node_indices]
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
    ) -> dict[str, int]:
        ls = self._state(state)
        if not pods or len(node_indices) == 0 or not ls.fresh[node_indices].any():
            return {}  # only nodes with fresh metrics are ever over a threshold
        estimate = self.estimate(ls, pods[0])
        used = self.estimated_usage(ls, node_indices) + estimate[None, :]
        alloc = ls.allocatable[node_indices]
        limit = ls.thresholds[node_indices]
        over = (limit > 0) & (alloc > 0) & (200 * used >= (2 * limit + 1) * alloc)
        over &= ls.fresh[node_indices][:, None]
        # Koordinator reports the first resource over its threshold.
        first = np.argmax(over, axis=1)[over.any(axis=1)]
        counts = np.bincount(first, minlength=len(ls.resources))
        return {
            f"node(s) {r} usage exceed threshold": int(counts[j])
            for j, r in enumerate(ls.resources)
            if counts[j]
        }

    # --- Score ----------------------------------------------------------------------------------
    def score_nodes(self, state: CycleState, job: JobInfo, node_indices: IntArray) -> FloatArray:
        ls = self._state(state)
        scores: FloatArray = np.zeros(len(node_indices), dtype=np.float64)
        fresh = np.flatnonzero(ls.fresh[node_indices])
        pods = state.pending_pods(job)
        if not pods or len(fresh) == 0:
            return scores
        fresh_nodes = node_indices[fresh]
        used = self.estimated_usage(ls, fresh_nodes) + self.estimate(ls, pods[0])[None, :]
        alloc = ls.allocatable[fresh_nodes]
        partial: FloatArray = np.zeros(len(fresh_nodes), dtype=np.float64)
        total_weight = 0
        for j, r in enumerate(ls.resources):
            weight = self.weights.get(r, 0)
            if not weight:
                continue
            total_weight += weight
            with np.errstate(divide="ignore", invalid="ignore"):
                free = np.where(
                    (alloc[:, j] > 0) & (used[:, j] <= alloc[:, j]),
                    (alloc[:, j] - used[:, j]) * 100 // np.maximum(alloc[:, j], 1),
                    0,
                )
            partial += weight * free
        if total_weight:
            partial /= total_weight
        scores[fresh] = partial
        return scores

    # --- Reserve --------------------------------------------------------------------------------
    def reserve(self, state: CycleState, job: JobInfo, plan: Plan) -> ReserveResult:
        ls = self._state(state)
        added: list[tuple[int, IntArray]] = []
        for key, idx in plan.assignment.items():
            estimate = self.estimate(ls, state.pods[key])
            ls.placed[idx] += estimate
            added.append((idx, estimate))
        ls.reserved[job.id] = added
        return ReserveResult(Status.success())

    def unreserve(self, state: CycleState, job: JobInfo, plan: Plan) -> None:
        ls = self._state(state)
        for idx, estimate in ls.reserved.pop(job.id, []):
            ls.placed[idx] -= estimate

    def _state(self, state: CycleState) -> LoadState:
        ls = state.plugin_data.get(self.name)
        if ls is None:
            self.setup(state)
            ls = state.plugin_data[self.name]
        assert isinstance(ls, LoadState)
        return ls
