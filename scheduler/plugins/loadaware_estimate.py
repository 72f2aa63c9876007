"""Koordinator v1.7's load estimates: a pod's estimated usage and a node's assign cache.

`estimate_pod` is Koordinator's default estimator (loadaware/estimator/default_estimator.go): for
each resource with a scaling factor, max(limit, request) x factor / 100 rounded, capped at the
limit; a pod that asks for nothing of cpu or memory counts 250m / 200Mi (not scaled).

`assigned_estimate` is what the assign cache (pod_assign_cache.go) adds to a node's reported usage
for the pods bound to it: a pod counts max(estimate - its reported usage, 0) when the NodeMetric
has no usage for it, when it was bound after the report's window began (updateTime - interval),
or when its forced-estimation deadline (bound + estimatedSecondsAfterPodScheduled, or started +
estimatedSecondsAfterInitialized) is after the report. Times are on the snapshot's clock.
`prod_usage` is the same for prod pods on top of their reported usage (prodUsageThresholds), and
`aggregated_usage` a percentile of the report's aggregated usage (`aggregated` thresholds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.model import CPU, MEMORY, NodeInfo, PodInfo
from scheduler.vocabulary import LABEL_PRIORITY_CLASS, LABEL_QOS_CLASS

# Koordinator's priority bands (apis/extension/priority.go): prod, mid, batch, free.
_PROD_BAND = (9000, 9999)
_OTHER_BANDS = ((7000, 7999), (5000, 5999), (3000, 3999))

# What Koordinator's estimator assumes for a pod that requests nothing of cpu or memory.
DEFAULT_REQUESTS: Mapping[str, int] = {CPU: 250, MEMORY: 200 * 1024 * 1024}


def is_prod(pod: PodInfo) -> bool:
    """Koordinator's `GetPodPriorityClassWithDefault(pod) == prod` (apis/extension/priority*.go):
    the priority-class label, else the priority band, else the QoS class (label, or a pod that
    requests something is LS, one that requests nothing is BE)."""
    label = pod.labels.get(LABEL_PRIORITY_CLASS)
    if label:
        return label == "koord-prod"
    if _PROD_BAND[0] <= pod.priority <= _PROD_BAND[1]:
        return True
    if any(low <= pod.priority <= high for low, high in _OTHER_BANDS):
        return False
    qos = pod.labels.get(LABEL_QOS_CLASS)
    if qos:
        return qos in ("SYSTEM", "LSE", "LSR", "LS")
    # Kubernetes BestEffort (nothing requested or limited) is BE, hence batch; the rest is LS.
    return any(int(v) > 0 for v in (*pod.requests.values(), *pod.limits.values()))


def estimate_pod(pod: PodInfo, factors: Mapping[str, int]) -> dict[str, int]:
    """The pod's estimated usage for every resource that has a scaling factor."""
    estimate: dict[str, int] = {}
    for resource, factor in factors.items():
        request = int(pod.requests.get(resource, 0))
        limit = int(pod.limits.get(resource, 0))
        quantity = max(limit, request)
        if quantity == 0:
            estimate[resource] = DEFAULT_REQUESTS.get(resource, 0)
            continue
        scaled = (quantity * factor * 2 + 100) // 200  # round half up, as math.Round on positives
        estimate[resource] = min(scaled, limit) if limit > 0 else scaled
    return estimate


def estimation_deadline(
    pod: PodInfo, after_scheduled: int | None, after_initialized: int | None
) -> float | None:
    """Until when the pod is estimated whatever its reported usage (None: no forced window)."""
    if after_initialized and after_initialized > 0 and pod.initialized_at is not None:
        return pod.initialized_at + after_initialized
    if after_scheduled and after_scheduled > 0 and pod.scheduled_at is not None:
        return pod.scheduled_at + after_scheduled
    return None


def assigned_estimate(
    node: NodeInfo,
    pods: Sequence[PodInfo],
    factors: Mapping[str, int],
    after_scheduled: int | None = None,
    after_initialized: int | None = None,
) -> dict[str, int]:
    """The usage the node's bound `pods` add on top of its NodeMetric report."""
    reported_at = node.usage_reported_at
    window_start = None if reported_at is None else reported_at - node.usage_report_interval
    delta: dict[str, int] = {}
    for pod in pods:
        usage = node.pod_usages.get(pod.key)
        deadline = estimation_deadline(pod, after_scheduled, after_initialized)
        recent = (
            window_start is not None
            and pod.scheduled_at is not None
            and pod.scheduled_at > window_start
        )
        forced = deadline is not None and reported_at is not None and deadline > reported_at
        if usage is not None and not recent and not forced:
            continue
        for resource, amount in estimate_pod(pod, factors).items():
            extra = amount - int((usage or {}).get(resource, 0))
            if extra > 0:
                delta[resource] = delta.get(resource, 0) + extra
    return delta


def prod_usage(
    node: NodeInfo,
    pods: Sequence[PodInfo],
    factors: Mapping[str, int],
    after_scheduled: int | None = None,
    after_initialized: int | None = None,
) -> dict[str, int]:
    """Prod pods' reported usage plus their assign cache (pod_assign_cache.go `prodUsage` and
    `prodDelta`)."""
    prod = [p for p in pods if is_prod(p)]
    usage = assigned_estimate(node, prod, factors, after_scheduled, after_initialized)
    for pod in prod:
        for resource, amount in node.pod_usages.get(pod.key, {}).items():
            usage[resource] = usage.get(resource, 0) + int(amount)
    return usage


def aggregated_usage(
    node: NodeInfo,
    kind: str,
    seconds: int,
    pods: Sequence[PodInfo],
    existing: Mapping[str, int],
    factors: Mapping[str, int],
) -> dict[str, int] | None:
    """The aggregated usage of `kind` ("p95", ...) over `seconds` plus the assign cache; None:
    use the node's usage. As Koordinator's getTargetAggregatedUsage: no duration means the
    longest one reported (none reported: the node usage); a duration the report lacks means the
    full estimates of the node's pods instead."""
    by_duration = node.aggregated_usage.get(kind, {})
    if not seconds:
        if not by_duration:
            return None
        seconds = max(by_duration)
    usage = by_duration.get(seconds)
    if usage is None:
        total: dict[str, int] = {}
        for pod in pods:
            for resource, amount in estimate_pod(pod, factors).items():
                total[resource] = total.get(resource, 0) + amount
        return total
    result = {r: int(v) + existing.get(r, 0) for r, v in usage.items()}
    for resource, amount in existing.items():
        result.setdefault(resource, amount)
    return result
