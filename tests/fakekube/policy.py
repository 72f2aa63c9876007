"""The pod subresources with rules of their own: `pods/binding` and `pods/eviction`.

Binding (BindingREST): sets `spec.nodeName` and the PodScheduled condition, copies the binding's
annotations; the Binding's `metadata.uid` / `metadata.resourceVersion` are storage preconditions
(a mismatch is the storage layer's 409); a pod being deleted, already assigned or still gated is
a 409 on `pods/binding`.

Eviction (EvictionREST): a pod that is Pending, terminal or already terminating is deleted with
no budget check; otherwise the one budget covering it (more than one: a 500 Status) is checked
from its *status*, as the disruption controller last wrote it, and decremented with the pod
recorded in `disruptedPods`; then the pod is marked with the DisruptionTarget condition and
deleted with the eviction's deleteOptions (grace period, UID / resourceVersion preconditions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.fakekube import errors
from tests.fakekube.disruption import PDBS, pod_is_ready, selector_matcher
from tests.fakekube.resources import served
from tests.fakekube.store import Obj, ObjectStore, meta, now_rfc3339

PODS = served("v1", "Pod")
MAX_DISRUPTED_POD_SIZE = 2000
BUDGET_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def success_status(code: int) -> dict[str, Any]:
    """The bare Status a successful binding or eviction answers (the handler fills in code)."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def storage_precondition_conflict(
    resource: str, namespace: str, name: str, field: str, wanted: str, have: str
) -> errors.ApiError:
    """A storage precondition failure, as InterpretUpdateError reports it: a 409 on `resource`."""
    label = {"uid": "UID", "resourceVersion": "ResourceVersion"}[field]
    return errors.conflict(
        resource,
        name,
        f"StorageError: invalid object, Code: 4, Key: /registry/{resource}/{namespace}/{name}, "
        f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {label} in precondition: "
        f"{wanted}, {label} in object meta: {have}",
    )


def bind(store: ObjectStore, namespace: str, name: str, binding: Obj) -> dict[str, Any]:
    """POST pods/<name>/binding; answers the 201 Status body or raises the API error."""
    binding_meta = binding.get("metadata") or {}
    if binding_meta.get("name", name) != name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    if target.get("kind") not in (None, "", "Node") or not target.get("name"):
        raise errors.bad_request("a binding's target must be a Node with a name")
    node = target["name"]

    def assign(pod: Obj) -> Obj:
        pod_meta = meta(pod)
        for field in ("uid", "resourceVersion"):
            wanted = binding_meta.get(field)
            if wanted and wanted != pod_meta[field]:
                raise storage_precondition_conflict(
                    "pods", namespace, name, field, wanted, pod_meta[field]
                )
        if pod_meta.get("deletionTimestamp"):
            raise errors.conflict(
                "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host"
            )
        spec = pod.setdefault("spec", {})
        if spec.get("nodeName"):
            raise errors.conflict(
                "pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            )
        if spec.get("schedulingGates"):
            raise errors.conflict(
                "pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates"
            )
        spec["nodeName"] = node
        if binding_meta.get("annotations"):
            pod_meta.setdefault("annotations", {}).update(binding_meta["annotations"])
        set_condition(pod, {"type": "PodScheduled", "status": "True"})
        return pod

    store.update(PODS, namespace, name, assign)
    return success_status(201)


def set_condition(pod: Obj, condition: dict[str, Any]) -> None:
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    for existing in conditions:
        if existing.get("type") == condition["type"]:
            if existing.get("status") != condition.get("status"):
                existing["lastTransitionTime"] = now_rfc3339()
            existing.update(condition)
            return
    conditions.append({"lastProbeTime": None, "lastTransitionTime": now_rfc3339(), **condition})


def _too_many_requests(retry_after: int, message: str) -> errors.ApiError:
    return errors.too_many_requests(
        BUDGET_MESSAGE, retry_after, [{"reason": "DisruptionBudget", "message": message}]
    )


def _still_processing(pdb_name: str) -> errors.ApiError:
    return _too_many_requests(
        10, f"The disruption budget {pdb_name} is still being processed by the server."
    )


def _can_ignore_budget(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(meta(pod).get("deletionTimestamp"))


def _with_resource_version(options: Obj, rv: str) -> Obj:
    return {
        **options,
        "preconditions": {**(options.get("preconditions") or {}), "resourceVersion": rv},
    }


def _check_and_decrement(
    store: ObjectStore, pdb: Obj, pod_name: str, retry_after: int, dry_run: bool
) -> None:
    """Verify-and-decrement on the budget's status, atomically (the store lock)."""
    name = meta(pdb)["name"]

    def decrement(current: Obj) -> Obj:
        status = current.setdefault("status", {})
        if status.get("observedGeneration", 0) < meta(current).get("generation", 1):
            raise _still_processing(name)
        allowed = status.get("disruptionsAllowed", 0)
        if allowed < 0:
            raise errors.forbidden(
                "poddisruptionbudget.policy", name, "pdb disruptions allowed is negative"
            )
        if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
            raise errors.forbidden(
                "poddisruptionbudget.policy",
                name,
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            )
        if allowed == 0:
            raise _too_many_requests(
                retry_after,
                f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy "
                f"pods and has {status.get('currentHealthy', 0)} currently",
            )
        if dry_run:
            return current
        status["disruptionsAllowed"] = allowed - 1
        status.setdefault("disruptedPods", {})[pod_name] = now_rfc3339()
        return current

    store.update(PDBS, meta(pdb)["namespace"], name, decrement)


def evict(
    store: ObjectStore,
    namespace: str,
    name: str,
    eviction: Obj,
    delete: Callable[[Obj], None],
    retry_after: int,
) -> dict[str, Any]:
    """POST pods/<name>/eviction: the 201 Status, or the API error. `delete(options)` deletes
    the pod through the API's own delete (graceful rules and preconditions included)."""
    if (eviction.get("metadata") or {}).get("name", name) != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = dict(eviction.get("deleteOptions") or {})
    rv_unset = not (options.get("preconditions") or {}).get("resourceVersion")
    pod = store.get(PODS, namespace, name)
    if _can_ignore_budget(pod):
        enforce = not meta(pod).get("deletionTimestamp") and (pod.get("status") or {}).get(
            "phase"
        ) not in ("Succeeded", "Failed")
        if enforce and rv_unset:
            options = _with_resource_version(options, meta(pod)["resourceVersion"])
        delete(options)
        return success_status(201)
    covering = [
        p
        for p in store.select(PDBS, namespace)[0]
        if selector_matcher((p.get("spec") or {}).get("selector") or {})(pod)
    ]
    if len(covering) > 1:
        raise errors.ApiError(
            500,
            "",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
        )
    unready_but_budget_healthy = False
    if covering:
        pdb = covering[0]
        status = pdb.get("status") or {}
        desired = status.get("desiredHealthy", 0)
        if not pod_is_ready(pod) and status.get("currentHealthy", 0) >= desired > 0:
            unready_but_budget_healthy = True
        else:
            dry_run = bool(options.get("dryRun"))
            _check_and_decrement(store, pdb, name, retry_after, dry_run)
    if unready_but_budget_healthy:
        options = _with_resource_version(options, meta(pod)["resourceVersion"])
    try:
        delete(options)
    except errors.ApiError as error:
        if error.code == 409 and unready_but_budget_healthy and rv_unset:
            raise _still_processing(meta(covering[0])["name"]) from error
        raise
    return success_status(201)
