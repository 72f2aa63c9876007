"""The pod subresources with rules of their own: `pods/binding` and `pods/eviction`.

Binding: sets `spec.nodeName` (and the PodScheduled condition), copies the binding's annotations,
honours the binding's UID precondition, refuses a pod that is already assigned or terminating.
Eviction: checks the PodDisruptionBudget covering the pod. The real server reads the budget's
status from the disruption controller; this fake has no controller, so it computes the same
numbers from the pods on the spot (healthy = Running, Ready unless said otherwise, not deleting).
"""

from __future__ import annotations

import math
from typing import Any

from tests.fakekube import errors
from tests.fakekube.resources import ResourceType, served
from tests.fakekube.selectors import label_matcher
from tests.fakekube.store import Obj, ObjectStore, meta, now_rfc3339

PODS = served("v1", "Pod")
PDBS = served("policy/v1", "PodDisruptionBudget")


def success_status(code: int, name: str, kind: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
        "details": {"name": name, "kind": kind},
    }


def bind(store: ObjectStore, namespace: str, name: str, binding: Obj) -> dict[str, Any]:
    """POST pods/<name>/binding; answers the 201 Status body or raises the API error."""
    binding_meta = binding.get("metadata") or {}
    if binding_meta.get("name", name) != name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    if target.get("kind") not in (None, "", "Node") or not target.get("name"):
        raise errors.bad_request("a binding's target must be a Node with a name")
    node = target["name"]
    uid = binding_meta.get("uid")

    def assign(pod: Obj) -> Obj:
        pod_meta = meta(pod)
        if uid and pod_meta["uid"] != uid:
            raise errors.conflict(
                "pods/binding",
                name,
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {pod_meta['uid']}",
            )
        if pod_meta.get("deletionTimestamp"):
            raise errors.conflict(
                "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host"
            )
        assigned = (pod.get("spec") or {}).get("nodeName")
        if assigned:
            raise errors.conflict(
                "pods/binding", name, f'pod {name} is already assigned to node "{assigned}"'
            )
        pod.setdefault("spec", {})["nodeName"] = node
        if binding_meta.get("annotations"):
            pod_meta.setdefault("annotations", {}).update(binding_meta["annotations"])
        set_condition(pod, {"type": "PodScheduled", "status": "True"})
        return pod

    store.update(PODS, namespace, name, assign)
    return success_status(201, name, "pods/binding")


def set_condition(pod: Obj, condition: dict[str, Any]) -> None:
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    for existing in conditions:
        if existing.get("type") == condition["type"]:
            if existing.get("status") != condition.get("status"):
                existing["lastTransitionTime"] = now_rfc3339()
            existing.update(condition)
            return
    conditions.append({"lastProbeTime": None, "lastTransitionTime": now_rfc3339(), **condition})


def pod_is_healthy(pod: Obj) -> bool:
    if meta(pod).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return not ready or ready[0].get("status") == "True"


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def budget_numbers(store: ObjectStore, pdb: Obj) -> dict[str, int]:
    """currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed of one budget, now."""
    spec = pdb.get("spec") or {}
    selector = spec.get("selector") or {}
    pods, _ = store.select(PODS, meta(pdb).get("namespace"), _selector_matcher(selector))
    pods = [p for p in pods if (p.get("status") or {}).get("phase") not in {"Succeeded", "Failed"}]
    # The real controller takes expectedPods from the owner's replica count, so a deleted pod
    # still counts as unavailable; without owners the fake keeps the high-water mark instead.
    recorded = (pdb.get("status") or {}).get("expectedPods", 0)
    expected = max(len(pods), recorded)
    healthy = sum(pod_is_healthy(p) for p in pods)
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = _scaled(spec.get("minAvailable", 0), expected)
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": max(0, healthy - desired),
    }


def _selector_matcher(selector: dict[str, Any]) -> Any:
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


def evict(
    store: ObjectStore, namespace: str, name: str, retry_after: int
) -> tuple[Obj, dict[str, Any]]:
    """POST pods/<name>/eviction: checks budgets; returns (the pod, the 201 Status) to delete."""
    pod = store.get(PODS, namespace, name)
    if meta(pod).get("deletionTimestamp"):
        return pod, success_status(201, name, "pods")  # already going: nothing to check
    phase = (pod.get("status") or {}).get("phase")
    if phase in {"Succeeded", "Failed"}:
        return pod, success_status(201, name, "pods")
    pdbs, _ = store.select(PDBS, namespace)
    covering = [p for p in pdbs if _selector_matcher(p.get("spec", {}).get("selector") or {})(pod)]
    if len(covering) > 1:
        raise errors.internal_error(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support."
        )
    if covering:
        pdb = covering[0]
        numbers = budget_numbers(store, pdb)
        healthy = pod_is_healthy(pod)
        allowed = (
            numbers["disruptionsAllowed"] > 0
            if healthy
            else (numbers["currentHealthy"] >= numbers["desiredHealthy"] > 0)
        )
        if not allowed:
            pdb_name = meta(pdb)["name"]
            raise errors.too_many_requests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                retry_after,
                [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {pdb_name} needs "
                        f"{numbers['desiredHealthy']} healthy pods and has "
                        f"{numbers['currentHealthy']} currently",
                    }
                ],
            )
    return pod, success_status(201, name, "pods")


def refresh_budget_status(store: ObjectStore, resource: ResourceType) -> None:
    """Keep every PDB's status in step with its pods (what the disruption controller does)."""
    if resource is not PODS and resource is not PDBS:
        return
    pdbs, _ = store.select(PDBS, None)
    for pdb in pdbs:
        numbers = budget_numbers(store, pdb)

        def write(current: Obj, numbers: dict[str, int] = numbers) -> Obj:
            status = current.setdefault("status", {})
            status.update(numbers)
            status["observedGeneration"] = current["metadata"].get("generation", 1)
            return current

        try:
            store.update(PDBS, meta(pdb).get("namespace"), meta(pdb)["name"], write)
        except errors.ApiError:
            continue  # deleted meanwhile
