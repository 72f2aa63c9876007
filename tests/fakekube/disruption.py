"""A disruption-controller stand-in: keeps every PodDisruptionBudget's status in step with its pods.

After every pod or budget write (`resync`) each budget gets, as the real controller computes them:
  expectedPods   integer minAvailable: every selected pod (any phase); maxUnavailable or a
                 percentage: the owners' scale, which the fake cannot read (it serves no workload
                 controllers), so the high-water mark of selected non-terminal pods stands in;
  desiredHealthy minAvailable, or expectedPods - maxUnavailable (percentages round up);
  currentHealthy selected pods that are Ready, not terminating, and not in `disruptedPods`;
  disruptionsAllowed  max(0, currentHealthy - desiredHealthy);
  disruptedPods  the eviction handler's entries, dropped once the pod is terminating or gone
                 or after two minutes;
  observedGeneration and the DisruptionAllowed condition.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fakekube import errors
from tests.fakekube.resources import ResourceType, served
from tests.fakekube.selectors import label_matcher
from tests.fakekube.store import Obj, ObjectStore, meta, now_rfc3339

PODS = served("v1", "Pod")
PDBS = served("policy/v1", "PodDisruptionBudget")
DELETION_TIMEOUT = timedelta(minutes=2)


def pod_is_ready(pod: Obj) -> bool:
    """The Ready condition is True. A Running pod seeded without any Ready condition counts as
    ready too (seeding convenience: the kubelet stand-in always writes one)."""
    status = pod.get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if ready:
        return ready[0].get("status") == "True"
    return status.get("phase") == "Running"


def selector_matcher(selector: dict[str, Any]) -> Any:
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], ",".join(expr.get("values") or [])
        terms.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }[op]
        )
    if not terms:
        return lambda obj: False  # an empty selector in policy/v1 selects nothing
    return label_matcher(",".join(terms))


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def _parse_time(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def budget_status(store: ObjectStore, pdb: Obj) -> dict[str, Any]:
    """The status the controller would write for one budget now (conditions aside)."""
    spec = pdb.get("spec") or {}
    old = pdb.get("status") or {}
    pods, _ = store.select(
        PODS, meta(pdb).get("namespace"), selector_matcher(spec.get("selector") or {})
    )
    now = datetime.now(UTC)
    disrupted = {}
    for pod in pods:
        stamp = (old.get("disruptedPods") or {}).get(meta(pod)["name"])
        going = bool(meta(pod).get("deletionTimestamp"))
        if stamp and not going and _parse_time(stamp) + DELETION_TIMEOUT > now:
            disrupted[meta(pod)["name"]] = stamp
    healthy = sum(
        1
        for pod in pods
        if not meta(pod).get("deletionTimestamp")
        and meta(pod)["name"] not in disrupted
        and pod_is_ready(pod)
    )
    min_available = spec.get("minAvailable")
    if spec.get("maxUnavailable") is None and isinstance(min_available, int):
        expected, desired = len(pods), min_available
    else:
        live = sum(
            1 for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )
        expected = max(live, old.get("expectedPods", 0))
        if spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
        else:
            desired = _scaled(min_available or 0, expected)
    status: dict[str, Any] = {
        "observedGeneration": meta(pdb).get("generation", 1),
        "disruptionsAllowed": max(0, healthy - desired),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


def allowed_condition(old: dict[str, Any], allowed: int, generation: int) -> dict[str, Any]:
    """The DisruptionAllowed condition, keeping its transition time while unchanged."""
    status, reason = ("True", "SufficientPods") if allowed > 0 else ("False", "InsufficientPods")
    previous = next(
        (c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None
    )
    since = previous["lastTransitionTime"] if previous and previous["status"] == status else None
    return {
        "type": "DisruptionAllowed",
        "status": status,
        "reason": reason,
        "message": "",
        "observedGeneration": generation,
        "lastTransitionTime": since or now_rfc3339(),
    }


def resync(store: ObjectStore, resource: ResourceType | None = None) -> None:
    """Recompute every budget's status after a write to pods or budgets (`None`: always)."""
    if resource is not None and resource is not PODS and resource is not PDBS:
        return
    pdbs, _ = store.select(PDBS, None)
    for pdb in pdbs:

        def write(current: Obj) -> Obj:
            status = budget_status(store, current)
            old = current.get("status") or {}
            status["conditions"] = [
                allowed_condition(old, status["disruptionsAllowed"], status["observedGeneration"])
            ]
            current["status"] = status
            return current

        try:
            store.update(PDBS, meta(pdb).get("namespace"), meta(pdb)["name"], write)
        except errors.ApiError:
            continue  # deleted meanwhile
