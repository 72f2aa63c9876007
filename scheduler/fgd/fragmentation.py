"""Expected GPU fragmentation of a node under the trace's workload (FGD, ATC'23), vectorised.

For one pod shape m (a GPU-model constraint, CPU, and `num_gpu` cards of `gpu_milli` each), the idle
GPU milli of a node that m could never use is its fragment:
- all idle GPU milli if m cannot run on the node at all (wrong model, too little CPU, or fewer than
  `num_gpu` cards with `gpu_milli` free);
- otherwise the idle milli on the cards whose free part is smaller than `gpu_milli`.
The node's fragmentation is the expectation over the workload's shape distribution p(m):
    F = idle - sum_m p(m) * fits_m * (idle - small_m),
where small_m is the idle milli on cards too small for m. Placing a pod changes F; the policy picks
the node and cards with the smallest increase (the "fragmentation gradient").

Evaluating this over every shape is the cost, so shapes are grouped: a GPU demand class j is a
distinct (gpu_milli, num_gpu); per node model and CPU bucket a table holds the probability mass of
each class that the model and CPU admit. A state then costs O(J) after O(cards x thresholds) counts.
CPU-only shapes are left out: every idle card is a fragment for them wherever the pod goes, so they
shift F by the same amount on every node. Memory is left out as in the paper (CPU binds first in
openb); feasibility still checks it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.fgd.cluster import MILLI_PER_GPU, IntArray, PodTable

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class NodeStats:
    """Per state: idle GPU milli, cards with >= threshold free, idle milli on smaller cards."""

    idle: IntArray  # (...,)
    cards_at_least: IntArray  # (..., U)
    small_idle: IntArray  # (..., U)


class FragmentationModel:
    """The workload's GPU demand distribution and the fragmentation it implies for node states."""

    def __init__(self, workload: PodTable, model_count: int, weight_exponent: float = 0.0) -> None:
        gpu_pods = np.flatnonzero(workload.num_gpu > 0)
        if gpu_pods.size == 0:
            raise ValueError("the workload has no GPU pods to measure fragmentation against")
        milli = workload.gpu_milli[gpu_pods]
        count = workload.num_gpu[gpu_pods]
        cpu = workload.cpu_milli[gpu_pods]
        self.thresholds: IntArray = np.unique(milli)  # U distinct per-card requests
        classes, class_of_pod = np.unique(
            np.stack([milli, count], axis=1), axis=0, return_inverse=True
        )
        class_of_pod = class_of_pod.reshape(-1)
        self.class_threshold = np.searchsorted(self.thresholds, classes[:, 0]).astype(np.intp)
        self.class_need: IntArray = classes[:, 1].astype(np.int64)
        self.cpu_thresholds: IntArray = np.unique(cpu)
        cpu_bucket = np.searchsorted(self.cpu_thresholds, cpu) + 1
        # mass[model, bucket, class]: probability of pods of the class needing exactly that CPU
        # and admitting the model; a cumulative sum over buckets makes the "CPU fits" lookup O(1).
        mass = np.zeros((model_count, self.cpu_thresholds.size + 1, classes.shape[0]))
        allows = workload.spec_allows[workload.spec_id[gpu_pods]]  # (P, models)
        # Each GPU pod of the trace weighs request**exponent (0: plain frequency, as in the paper).
        weight = (milli * count).astype(np.float64) ** weight_exponent
        weight = weight / weight.sum()
        for model in range(model_count):
            admitted = allows[:, model]
            np.add.at(mass[model], (cpu_bucket[admitted], class_of_pod[admitted]), weight[admitted])
        self.admitted_mass: FloatArray = np.cumsum(mass, axis=1)

    def stats(self, gpu_free: IntArray) -> NodeStats:
        """Counts for states given their cards' free milli, shape (..., cards)."""
        at_least = gpu_free[..., None] >= self.thresholds
        return NodeStats(
            idle=gpu_free.sum(axis=-1),
            cards_at_least=at_least.sum(axis=-2),
            small_idle=np.where(at_least, 0, gpu_free[..., None]).sum(axis=-2),
        )

    def fragmentation(self, model_id: IntArray, cpu_free: IntArray, stats: NodeStats) -> FloatArray:
        """Expected fragmented GPU milli for states (broadcast over leading dimensions)."""
        bucket = np.searchsorted(self.cpu_thresholds, cpu_free, side="right")
        admitted = self.admitted_mass[model_id, bucket]  # (..., J)
        fits = stats.cards_at_least[..., self.class_threshold] >= self.class_need
        usable = stats.idle[..., None] - stats.small_idle[..., self.class_threshold]
        result: FloatArray = stats.idle - (admitted * fits * usable).sum(axis=-1)
        return result

    def after_shared(
        self, gpu_free: IntArray, stats: NodeStats, request: int
    ) -> tuple[NodeStats, npt.NDArray[np.bool_]]:
        """States after taking `request` milli from each card in turn: shape (K, cards)."""
        room = gpu_free >= request
        left = gpu_free - request
        before = gpu_free[..., None] >= self.thresholds
        after = left[..., None] >= self.thresholds
        at_least = stats.cards_at_least[:, None, :] - before + after
        small = (
            stats.small_idle[:, None, :]
            - np.where(before, 0, gpu_free[..., None])
            + np.where(after, 0, left[..., None])
        )
        idle = np.broadcast_to(stats.idle[:, None] - request, gpu_free.shape)
        return NodeStats(idle, at_least, small), room

    def after_whole(self, stats: NodeStats, cards: int) -> NodeStats:
        """States after taking `cards` entirely free cards (these count for every threshold)."""
        return NodeStats(
            idle=stats.idle - cards * MILLI_PER_GPU,
            cards_at_least=stats.cards_at_least - cards,
            small_idle=stats.small_idle,
        )
