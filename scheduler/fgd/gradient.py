"""The fragmentation-aware policy `fgd`: fragmentation gradient descent plus model scarcity.

For each pod it takes the node and card whose placement raises the expected GPU fragmentation
(`fragmentation.py`) the least, as FGD (ATC'23) does, with three changes that measured better on the
openb traces (docs/benchmarks.md):
- the increase is kept exact, not squashed into the plugin's integer 0..100 score; increases within
  `RISE_TOLERANCE` count as equal and among them the node left with the least idle GPU wins (pack
  where nothing is stranded), then the seeded order;
- the shape distribution weighs each shape by its frequency divided by its GPU request, so the
  small shared requests that fill partial cards count as much as the GPU they carry;
- a GPU-model scarcity term: placing r milli on a model whose capacity model-constrained pods are
  expected to claim at pressure P (claimed / capacity) costs `SCARCITY x r x P` more, which keeps
  unconstrained pods off the models that constrained pods can only use.

Scores are cached per (pod shape, node) and recomputed only for nodes changed since the shape was
last seen (`ClusterState.version`): a pod costs O(changed nodes x cards x demand classes).
"""

from __future__ import annotations

import numpy as np

from scheduler.fgd.cluster import (
    MILLI_PER_GPU,
    BoolArray,
    Cluster,
    ClusterState,
    IntArray,
    PodTable,
)
from scheduler.fgd.fragmentation import FloatArray, FragmentationModel, NodeStats
from scheduler.fgd.placement import Placement, best_node, whole_cards

RISE_TOLERANCE = 20.0  # milli-GPU (2% of a card): rises closer than this are the same rise
SCARCITY = 1.0
SHAPE_WEIGHT_EXPONENT = -1.0  # frequency x request**exponent


def model_pressure(workload: PodTable, cluster: Cluster) -> FloatArray:
    """Per GPU model: the share of its capacity that model-constrained pods are expected to claim.

    A constrained pod's request is spread over the models it accepts in proportion to their
    capacity; the sum is scaled so that the whole workload would claim exactly the cluster.
    """
    capacity = np.bincount(
        cluster.model_id, weights=cluster.gpu_count * MILLI_PER_GPU, minlength=len(cluster.models)
    )
    allows = workload.spec_allows[workload.spec_id]  # (P, models)
    request = workload.gpu_request.astype(np.float64)
    constrained = (~allows).any(axis=1) & (request > 0)
    accepted = allows[constrained] * capacity
    share = accepted / np.maximum(accepted.sum(axis=1, keepdims=True), 1.0)
    claimed = (share * request[constrained, None]).sum(axis=0)
    scale = cluster.total_gpu_milli / max(float(request.sum()), 1.0)
    pressure: FloatArray = claimed * scale / np.maximum(capacity, 1.0)
    return pressure


class FragmentationGradient:
    """FGD with exact rises, packing among equal rises and a model-scarcity term."""

    name = "fgd"

    def __init__(self, state: ClusterState, workload: PodTable, rank: IntArray) -> None:
        cluster = state.cluster
        self.model = FragmentationModel(
            workload, len(cluster.models), weight_exponent=SHAPE_WEIGHT_EXPONENT
        )
        self.rank = rank
        self.pressure = model_pressure(workload, cluster)[cluster.model_id]
        self.stats = self.model.stats(state.gpu_free)
        self.frag = self.model.fragmentation(cluster.model_id, state.cpu_free, self.stats)
        self.node_version = state.version.copy()
        self._cache: dict[tuple[int, ...], tuple[FloatArray, IntArray, IntArray]] = {}

    def place(self, state: ClusterState, pods: PodTable, i: int, feasible: BoolArray) -> Placement:
        self._refresh_nodes(state)
        rise, card = self._cached_rise(state, pods, i)
        nodes = np.flatnonzero(feasible)
        cost = rise[nodes] + SCARCITY * float(pods.gpu_request[i]) * self.pressure[nodes]
        nodes = nodes[cost <= cost.min() + RISE_TOLERANCE]
        node = best_node(nodes, -self.stats.idle[nodes].astype(np.float64), self.rank)
        count, request = int(pods.num_gpu[i]), int(pods.gpu_milli[i])
        if count == 0:
            return node, ()
        if request >= MILLI_PER_GPU:
            return node, whole_cards(state.gpu_free[node], count)
        return node, (int(card[node]),)

    def _refresh_nodes(self, state: ClusterState) -> None:
        changed = np.flatnonzero(self.node_version != state.version)
        if changed.size:
            fresh = self.model.stats(state.gpu_free[changed])
            self.stats.idle[changed] = fresh.idle
            self.stats.cards_at_least[changed] = fresh.cards_at_least
            self.stats.small_idle[changed] = fresh.small_idle
            model_id = state.cluster.model_id[changed]
            self.frag[changed] = self.model.fragmentation(model_id, state.cpu_free[changed], fresh)
            self.node_version[changed] = state.version[changed]

    def _cached_rise(
        self, state: ClusterState, pods: PodTable, i: int
    ) -> tuple[FloatArray, IntArray]:
        shape = (
            int(pods.cpu_milli[i]),
            int(pods.memory_mib[i]),
            int(pods.num_gpu[i]),
            int(pods.gpu_milli[i]),
            int(pods.spec_id[i]),
        )
        entry = self._cache.get(shape)
        if entry is None:
            n = state.cluster.size
            entry = (np.zeros(n), np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64))
            self._cache[shape] = entry
        rise, card, seen = entry
        stale = np.flatnonzero(seen != state.version)
        if stale.size:
            rise[stale], card[stale] = self.rise(state, pods, i, stale)
            seen[stale] = state.version[stale]
        return rise, card

    def rise(
        self, state: ClusterState, pods: PodTable, i: int, nodes: IntArray
    ) -> tuple[FloatArray, IntArray]:
        """Fragmentation increase on `nodes` for pod i at its best card (card -1 if none)."""
        model = self.model
        stats = NodeStats(
            self.stats.idle[nodes], self.stats.cards_at_least[nodes], self.stats.small_idle[nodes]
        )
        model_id = state.cluster.model_id[nodes]
        cpu_after = state.cpu_free[nodes] - pods.cpu_milli[i]
        before = self.frag[nodes]
        count, request = int(pods.num_gpu[i]), int(pods.gpu_milli[i])
        no_card = np.full(nodes.size, -1, dtype=np.int64)
        if count == 0:
            return model.fragmentation(model_id, cpu_after, stats) - before, no_card
        if request >= MILLI_PER_GPU:
            after = model.fragmentation(model_id, cpu_after, model.after_whole(stats, count))
            return after - before, no_card
        gpu_free = state.gpu_free[nodes]
        shared, room = model.after_shared(gpu_free, stats, request)
        after_each = model.fragmentation(model_id[:, None], cpu_after[:, None], shared)
        rise_each: FloatArray = np.where(room, after_each - before[:, None], np.inf)
        lowest = rise_each.min(axis=1)
        # Among cards that raise fragmentation equally, the tightest fit keeps whole cards whole.
        level = rise_each <= lowest[:, None] + 1e-9
        best = np.argmin(np.where(level, gpu_free, MILLI_PER_GPU + 1), axis=1)
        return lowest, best.astype(np.int64)
