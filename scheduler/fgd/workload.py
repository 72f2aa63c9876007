"""The arrival sequence of one replay: the trace's pods shuffled and tuned to a target GPU load.

The FGD protocol (ATC'23, "tune ratio 1.3") replays a workload whose GPU requests add up to 130% of
the cluster's GPU capacity. A trace that asks for less is topped up with pods sampled (with
replacement, seeded) from itself; one that asks for more (multigpu50 asks for 183%) is cut after
the pod that crosses the target. Each seed gives its own shuffle and sample, the same seed the same.
"""

from __future__ import annotations

import numpy as np

from scheduler.fgd.cluster import PodTable

DEFAULT_TUNE_RATIO = 1.3


def tune_workload(
    pods: PodTable, total_gpu_milli: int, seed: int, ratio: float = DEFAULT_TUNE_RATIO
) -> PodTable:
    """Shuffle `pods`, then top up or cut so that GPU requests just reach `ratio` x capacity."""
    if len(pods) == 0:
        raise ValueError("the pod list is empty")
    requests = pods.gpu_request
    if not requests.any():
        raise ValueError("no pod in the trace asks for a GPU")
    rng = np.random.default_rng(seed)
    target = ratio * total_gpu_milli
    order = rng.permutation(len(pods))
    have = int(requests.sum())
    if have < target:
        # Sample in chunks until the target is crossed, then keep the prefix that crosses it;
        # the extra pods are spread over the whole sequence by a second shuffle.
        extra: list[np.ndarray] = []
        missing = target - have
        mean_request = max(float(requests.mean()), 1.0)
        while missing > 0:
            chunk = rng.integers(0, len(pods), size=int(missing / mean_request) + 16)
            cum = np.cumsum(requests[chunk])
            cut = int(np.searchsorted(cum, missing, side="left"))
            if cut < len(chunk):
                extra.append(chunk[: cut + 1])
                missing = 0
            else:
                extra.append(chunk)
                missing -= int(cum[-1])
        order = np.concatenate([order, *extra])
        order = order[rng.permutation(len(order))]
    cum = np.cumsum(requests[order])
    last = int(np.searchsorted(cum, target, side="left"))
    return pods.take(order[: last + 1])
