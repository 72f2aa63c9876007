"""Request semantics of the fake API server: get, list, create, replace, patch, delete and the
pod subresources, with the admission and strategy rules kube-apiserver applies to them."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.fakekube import deletion, disruption, errors, events, policy, validation
from tests.fakekube.patches import json_patch, merge_patch, strategic_merge_patch
from tests.fakekube.resources import ResourceType, Route, served
from tests.fakekube.selectors import field_matcher, label_matcher
from tests.fakekube.store import Obj, ObjectStore, meta

if TYPE_CHECKING:
    from tests.fakekube.kubelet import Kubelet

NAMESPACES = served("v1", "Namespace")
PRIORITY_CLASSES = served("scheduling.k8s.io/v1", "PriorityClass")
# Resources without a status subresource: the main resource writes `status` (Koordinator's
# and scheduler-plugins' PodGroup CRD declares none; its controller merge-patches the object).
WITHOUT_STATUS = {"configmaps", "priorityclasses", "podgroups", "events"}
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclass
class Reply:
    code: int
    body: Any
    headers: dict[str, str]


@dataclass
class Settings:
    """Behaviour knobs a test may turn."""

    # Seconds sent with an eviction's "needs N healthy pods" 429 (the real server sends none:
    # set 0 for that); "still being processed" 429s always say 10, as the real server does.
    eviction_retry_after: int = 1
    # > 0: every terminating pod lasts this many wall seconds, whatever its grace period (older
    # tests); 0: the kubelet stand-in's time_scale / manual mode decide.
    pod_grace_seconds: float = 0.0
    bookmark_interval: float = 5.0  # seconds between watch BOOKMARK events
    watch_timeout: float = 1800.0  # a watch without timeoutSeconds ends after this
    # Seconds each watch event reaches its watchers after its write (a lagging watch cache).
    watch_delay: float = 0.0
    # How long a watch or list asking for a resourceVersion newer than the store waits for it
    # before answering ResourceVersionTooLarge (the watch cache's blockTimeout: 3 s).
    too_large_wait: float = 3.0


def _status_success(resource: ResourceType, obj: Obj) -> dict[str, Any]:
    details = {"name": meta(obj)["name"], "kind": resource.plural, "uid": meta(obj)["uid"]}
    if resource.group:
        details["group"] = resource.group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def encode_continue(rv: int, after: tuple[str, str]) -> str:
    token = json.dumps({"rv": rv, "start": list(after)})
    return base64.urlsafe_b64encode(token.encode()).decode()


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        namespace, name = data["start"]
        return int(data["rv"]), (str(namespace), str(name))
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc


class ApiLogic:
    """Everything but HTTP: takes a route and a decoded body, answers a Reply or raises."""

    def __init__(self, store: ObjectStore, settings: Settings, kubelet: Kubelet) -> None:
        self.store = store
        self.settings = settings
        self.kubelet = kubelet

    # --- reads ---------------------------------------------------------------------------
    def get(self, route: Route) -> Reply:
        assert route.name is not None
        return Reply(200, self.store.get(route.resource, route.namespace, route.name), {})

    def list(self, route: Route, query: dict[str, str]) -> Reply:
        resource = route.resource
        labels = label_matcher(query.get("labelSelector"))
        fields = field_matcher(query.get("fieldSelector"), resource)
        after = None
        if query.get("continue"):
            token_rv, after = decode_continue(query["continue"])
            if token_rv < self.store.horizon:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                )
        wait_until_fresh(self.store, self.settings, query.get("resourceVersion"))
        limit = int(query.get("limit") or 0)
        selected = query.get("labelSelector") or query.get("fieldSelector")
        items, rv, remaining = self.store.page(
            resource,
            route.namespace,
            (lambda o: labels(o) and fields(o)) if selected else None,
            after,
            limit,
        )
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if remaining != 0:
            metadata["continue"] = encode_continue(rv, _key(items[-1]))
            if remaining is not None:  # like the real server: no count under a selector
                metadata["remainingItemCount"] = remaining
        if not resource.custom:  # built-in lists leave kind/apiVersion off their items
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        body = {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.api_version,
            "metadata": metadata,
            "items": items,
        }
        return Reply(200, body, {})

    # --- writes --------------------------------------------------------------------------
    def create(self, route: Route, body: Obj) -> Reply:
        resource = route.resource
        if route.name is not None:
            return self._subresource_post(route, body)
        metadata = meta(body)
        if resource.namespaced:
            if metadata.get("namespace") not in (None, "", route.namespace):
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            metadata["namespace"] = route.namespace
            if self.store.find(NAMESPACES, None, route.namespace or "") is None:
                raise errors.not_found("namespaces", route.namespace or "")
        if not metadata.get("name") and not metadata.get("generateName"):
            raise errors.invalid(
                resource, "", "metadata.name", "Required value: name or generateName is required"
            )
        for server_owned in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp"):
            metadata.pop(server_owned, None)
        if resource.plural == "pods":
            self._admit_pod(body)  # admission (mutating) first, then validation, as the server
            refused = validation.pod_errors(body)
            if refused:
                raise errors.invalid_fields("Pod", metadata.get("name", ""), refused)
        elif resource.plural == "events":
            refused = events.event_errors(body, resource.group)
            if refused:
                raise errors.invalid_fields("Event", metadata.get("name", ""), refused)
        elif resource.custom and resource.plural not in WITHOUT_STATUS:
            body.pop("status", None)  # status belongs to the status subresource
        created = self.store.create(resource, body)
        disruption.resync(self.store, resource)
        if resource.plural == "pods":
            self.kubelet.maybe_admit(created)  # created with spec.nodeName: its kubelet admits it
        return Reply(201, created, {})

    def _admit_pod(self, pod: Obj) -> None:
        spec = pod.setdefault("spec", {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", deletion.DEFAULT_GRACE)
        class_name = spec.get("priorityClassName")
        if class_name:
            found = self.store.find(PRIORITY_CLASSES, None, class_name)
            if found is None:
                raise errors.ApiError(
                    403,
                    "Forbidden",
                    f'pods "{meta(pod).get("name", "")}" is forbidden: no PriorityClass with '
                    f"name {class_name} was found",
                    {"name": meta(pod).get("name", ""), "kind": "pods"},
                )
            spec["priority"] = found.get("value", 0)
        else:
            classes, _ = self.store.select(
                PRIORITY_CLASSES, None, lambda c: bool(c.get("globalDefault"))
            )
            spec.setdefault("priority", classes[0].get("value", 0) if classes else 0)
        pod["status"] = {"phase": "Pending", "qosClass": qos_class(pod)}

    def replace(self, route: Route, body: Obj) -> Reply:
        assert route.name is not None
        resource, name = route.resource, route.name
        if meta(body).get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta(body).get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        wanted_rv = meta(body).get("resourceVersion")
        if not wanted_rv and resource.custom:
            raise errors.invalid(
                resource,
                name,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            )

        def change(current: Obj) -> Obj:
            _check_preconditions(resource, name, current, meta(body).get("uid"), wanted_rv)
            return self._keep_owned_parts(route, current, body)

        updated = self.store.update(resource, route.namespace, name, change)
        disruption.resync(self.store, resource)
        return Reply(200, updated, {})

    def patch(self, route: Route, content_type: str, body: Any) -> Reply:
        assert route.name is not None
        resource, name = route.resource, route.name
        accepted = [JSON_PATCH, MERGE] + ([] if resource.custom else [STRATEGIC])
        if content_type not in accepted:
            raise errors.unsupported_media_type(content_type, accepted)
        wanted_rv = meta(body).get("resourceVersion") if isinstance(body, dict) else None

        wanted_uid = meta(body).get("uid") if isinstance(body, dict) else None

        def change(current: Obj) -> Obj:
            _check_preconditions(resource, name, current, wanted_uid, wanted_rv)
            if content_type == JSON_PATCH:
                if not isinstance(body, list):
                    raise errors.bad_request("a JSON patch must be a list of operations")
                patched = json_patch(current, body)
            elif content_type == MERGE:
                patched = merge_patch(current, body)
            else:
                patched = strategic_merge_patch(current, body)
            return self._keep_owned_parts(route, current, patched)

        updated = self.store.update(resource, route.namespace, name, change)
        disruption.resync(self.store, resource)
        return Reply(200, updated, {})

    @staticmethod
    def _keep_owned_parts(route: Route, current: Obj, proposed: Obj) -> Obj:
        """The main resource may not write status; the status subresource writes only status."""
        if route.subresource == "status" and route.resource.plural in WITHOUT_STATUS:
            raise errors.not_found(route.resource.qualified, route.name or "")
        if route.resource.plural == "events":
            refused = events.event_update_errors(proposed, current, route.resource.group)
            if refused:
                raise errors.invalid_fields("Event", route.name or "", refused)
        if route.subresource == "status":
            result = dict(current)
            result["status"] = proposed.get("status")
            if result["status"] is None:
                result.pop("status")
            return result
        result = dict(proposed)
        if route.resource.plural not in WITHOUT_STATUS:
            if "status" in current:
                result["status"] = current["status"]
            else:
                result.pop("status", None)
        for kept in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            if kept in current["metadata"]:
                meta(result)[kept] = current["metadata"][kept]
        return result

    def delete(self, route: Route, options: Obj, query: dict[str, str]) -> Reply:
        assert route.name is not None
        resource, name = route.resource, route.name
        current = self.store.get(resource, route.namespace, name)
        deletion.check_preconditions(resource.kind, resource.group, current, options)
        if resource.plural == "pods":
            return Reply(200, self._delete_pod(route, current, options, query), {})
        gone = self.store.delete(resource, route.namespace, name)
        disruption.resync(self.store, resource)
        if resource.custom:
            return Reply(200, gone, {})
        return Reply(200, _status_success(resource, gone), {})

    def _delete_pod(self, route: Route, current: Obj, options: Obj, query: dict[str, str]) -> Obj:
        assert route.name is not None
        plan = deletion.plan_pod_delete(current, deletion.grace_option(options, query))
        if plan.action == "pending":
            return current
        if plan.action == "mark":

            def change(pod: Obj) -> Obj:
                deletion.check_preconditions("Pod", "", pod, options)
                return deletion.mark(pod, plan)

            current = self.store.update(route.resource, route.namespace, route.name, change)
            if plan.grace > 0:
                disruption.resync(self.store, route.resource)
                self.kubelet.pod_terminating(current, plan.shortened_by)
                return current
        gone = self.store.delete(route.resource, route.namespace, route.name)
        disruption.resync(self.store, route.resource)
        return gone

    def _evict(self, route: Route, eviction: Obj) -> Reply:
        assert route.name is not None and route.namespace is not None
        pod_route = Route(route.resource, route.namespace, route.name, None)

        def delete(options: Obj) -> None:
            # addConditionAndDeletePod: the DisruptionTarget condition first, then the delete.
            if options.get("dryRun"):
                return  # a dry run checks (budgets included) and changes nothing

            def condition(pod: Obj) -> Obj:
                deletion.check_preconditions("Pod", "", pod, options)
                policy.set_condition(
                    pod,
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "EvictionByEvictionAPI",
                        "message": "Eviction API: evicting",
                    },
                )
                return pod

            pod = self.store.update(route.resource, route.namespace, route.name, condition)
            if (options.get("preconditions") or {}).get("resourceVersion"):
                options = {
                    **options,
                    "preconditions": {
                        **options["preconditions"],
                        "resourceVersion": meta(pod)["resourceVersion"],
                    },
                }
            self.delete(pod_route, options, {})

        try:
            status = policy.evict(
                self.store,
                route.namespace,
                route.name,
                eviction,
                delete,
                self.settings.eviction_retry_after,
            )
        finally:
            disruption.resync(self.store)  # the controller sees the handler's budget write
        return Reply(201, status, {})

    def _subresource_post(self, route: Route, body: Obj) -> Reply:
        assert route.name is not None and route.namespace is not None
        if route.subresource == "binding":
            status = policy.bind(self.store, route.namespace, route.name, body)
            pod = self.store.find(route.resource, route.namespace, route.name)
            if pod is not None:
                self.kubelet.maybe_admit(pod)
            return Reply(201, status, {})
        if route.subresource == "eviction":
            return self._evict(route, body)
        raise errors.method_not_allowed("POST")


def wait_until_fresh(store: ObjectStore, settings: Settings, requested: str | None) -> None:
    """A read at least as new as `requested` waits for the store to get there, then answers
    504 ResourceVersionTooLarge (the watch cache's waitUntilFreshAndBlock)."""
    if not requested or requested == "0" or not requested.isdigit():
        return
    wanted = int(requested)
    deadline = time.monotonic() + settings.too_large_wait
    with store.cond:
        while store.resource_version < wanted:
            left = deadline - time.monotonic()
            if left <= 0 or store.closed:
                raise errors.too_large_resource_version(wanted, store.resource_version)
            store.cond.wait(left)


def qos_class(pod: Obj) -> str:
    """Guaranteed, Burstable or BestEffort from the containers' cpu and memory."""
    spec = pod.get("spec") or {}
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    any_set, guaranteed = False, True
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = {**limits, **(resources.get("requests") or {})}
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                any_set = True
            if name not in limits or requests.get(name) != limits.get(name):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _check_preconditions(
    resource: ResourceType, name: str, current: Obj, uid: str | None, rv: str | None
) -> None:
    """A body's uid and resourceVersion, when given, must be the stored object's."""
    if uid and uid != meta(current)["uid"]:
        raise errors.conflict(
            resource,
            name,
            f"Precondition failed: UID in precondition: {uid}, "
            f"UID in object meta: {meta(current)['uid']}",
        )
    if rv and rv != meta(current)["resourceVersion"]:
        raise errors.conflict(resource, name, errors.STALE_OBJECT)


def _key(obj: Obj) -> tuple[str, str]:
    return meta(obj).get("namespace") or "", meta(obj)["name"]
