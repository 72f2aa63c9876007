"""Writing objects: create-or-replace of custom resources and the few built-ins we manage, and
creating a job's pods (with its PodGroup) idempotently.

Server-side apply is not needed: `apply_object` reads the object, creates it when missing and
otherwise replaces it carrying the read resourceVersion, retrying the read on a 409 conflict.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from koordweb.backends.kube.connection import RetryPolicy
from scheduler.vocabulary import (
    DEFAULT_POD_GROUP_API,
    GANG_MIN_AVAILABLE,
    GANG_MODE,
    GANG_NAME,
    GANG_TOTAL_NUMBER,
    K8S_SCHEDULING_API,
    KOORD_SCHEDULING_API,
    KOORD_SLO_API,
)

Doc = dict[str, Any]
CONFLICT_ATTEMPTS = 5


@dataclass(frozen=True)
class Endpoint:
    """read / create / replace of one kind, as raw-JSON client calls."""

    read: Callable[[str | None, str], Any]
    create: Callable[[str | None, Doc], Any]
    replace: Callable[[str | None, str, Doc], Any]


def _custom(api: Any, api_version: str, plural: str, namespaced: bool) -> Endpoint:
    group, version = api_version.split("/")
    raw = {"_preload_content": False}
    if namespaced:
        return Endpoint(
            lambda ns, n: api.get_namespaced_custom_object(group, version, ns, plural, n, **raw),
            lambda ns, d: api.create_namespaced_custom_object(group, version, ns, plural, d, **raw),
            lambda ns, n, d: api.replace_namespaced_custom_object(
                group, version, ns, plural, n, d, **raw
            ),
        )
    return Endpoint(
        lambda ns, n: api.get_cluster_custom_object(group, version, plural, n, **raw),
        lambda ns, d: api.create_cluster_custom_object(group, version, plural, d, **raw),
        lambda ns, n, d: api.replace_cluster_custom_object(group, version, plural, n, d, **raw),
    )


def endpoints(api_client: client.ApiClient) -> dict[tuple[str, str], Endpoint]:
    # Raw answers (_preload_content=False) and dict bodies do not match the static types.
    custom: Any = client.CustomObjectsApi(api_client)
    core: Any = client.CoreV1Api(api_client)
    scheduling: Any = client.SchedulingV1Api(api_client)
    policy: Any = client.PolicyV1Api(api_client)
    raw = {"_preload_content": False}
    koord, sigs = KOORD_SCHEDULING_API, DEFAULT_POD_GROUP_API
    return {
        (koord, "ClusterNetworkTopology"): _custom(
            custom, koord, "clusternetworktopologies", False
        ),
        (koord, "Device"): _custom(custom, koord, "devices", False),
        (sigs, "ElasticQuota"): _custom(custom, sigs, "elasticquotas", True),
        (sigs, "PodGroup"): _custom(custom, sigs, "podgroups", True),
        (KOORD_SLO_API, "NodeMetric"): _custom(custom, KOORD_SLO_API, "nodemetrics", False),
        (K8S_SCHEDULING_API, "PriorityClass"): Endpoint(
            lambda ns, n: scheduling.read_priority_class(n, **raw),
            lambda ns, d: scheduling.create_priority_class(d, **raw),
            lambda ns, n, d: scheduling.replace_priority_class(n, d, **raw),
        ),
        ("policy/v1", "PodDisruptionBudget"): Endpoint(
            lambda ns, n: policy.read_namespaced_pod_disruption_budget(n, ns, **raw),
            lambda ns, d: policy.create_namespaced_pod_disruption_budget(ns, d, **raw),
            lambda ns, n, d: policy.replace_namespaced_pod_disruption_budget(n, ns, d, **raw),
        ),
        ("v1", "Namespace"): Endpoint(
            lambda ns, n: core.read_namespace(n, **raw),
            lambda ns, d: core.create_namespace(d, **raw),
            lambda ns, n, d: core.replace_namespace(n, d, **raw),
        ),
        ("v1", "ConfigMap"): Endpoint(
            lambda ns, n: core.read_namespaced_config_map(n, ns, **raw),
            lambda ns, d: core.create_namespaced_config_map(ns, d, **raw),
            lambda ns, n, d: core.replace_namespaced_config_map(n, ns, d, **raw),
        ),
    }


class ObjectWriter:
    """Create-or-replace of manifests, and job pod creation."""

    def __init__(self, api_client: client.ApiClient, retry: RetryPolicy, scheduler_name: str):
        self.endpoints = endpoints(api_client)
        self.core: Any = client.CoreV1Api(api_client)
        self.retry = retry
        self.scheduler_name = scheduler_name

    def apply_object(self, doc: Doc) -> Doc:
        """Create the object, or replace it when it exists; returns the stored object."""
        key = (doc.get("apiVersion", ""), doc.get("kind", ""))
        endpoint = self.endpoints.get(key)
        if endpoint is None:
            raise ValueError(f"apply_object does not manage {key[0]} {key[1]}")
        metadata = doc.get("metadata") or {}
        name, namespace = metadata["name"], metadata.get("namespace")
        if key[1] in ("ElasticQuota", "PodGroup", "PodDisruptionBudget", "ConfigMap"):
            namespace = namespace or "default"
        what = f"apply {key[1]} {namespace + '/' if namespace else ''}{name}"
        for _ in range(CONFLICT_ATTEMPTS):
            try:
                return self._apply_once(endpoint, namespace, name, doc, what)
            except ApiException as error:
                if error.status != 409:  # 409: created or changed meanwhile; read again
                    raise
        raise RuntimeError(f"{what}: still conflicting after {CONFLICT_ATTEMPTS} attempts")

    def _apply_once(
        self, endpoint: Endpoint, namespace: str | None, name: str, doc: Doc, what: str
    ) -> Doc:
        try:
            current = _json(self.retry.call(what, lambda: endpoint.read(namespace, name)))
        except ApiException as error:
            if error.status != 404:
                raise
            current = None
        wanted = copy.deepcopy(doc)
        wanted.setdefault("metadata", {}).pop("resourceVersion", None)
        if namespace:
            wanted["metadata"]["namespace"] = namespace
        if current is None:
            return _json(self.retry.call(what, lambda: endpoint.create(namespace, wanted)))
        wanted["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return _json(self.retry.call(what, lambda: endpoint.replace(namespace, name, wanted)))

    def replace_status(self, current: Doc, status: Doc) -> Doc:
        """Write a custom object's status through the object itself (a PodGroup: its CRD has no
        status subresource), replacing the version read (`current`, as the watch shows it): a
        409 means it changed meanwhile, and the caller tries again with the next version."""
        key = (current.get("apiVersion", ""), current.get("kind", ""))
        endpoint = self.endpoints.get(key)
        if endpoint is None:
            raise ValueError(f"replace_status does not manage {key[0]} {key[1]}")
        wanted = copy.deepcopy(current)
        wanted["status"] = status
        metadata = wanted.get("metadata") or {}
        name, namespace = metadata["name"], metadata.get("namespace")
        return _json(
            self.retry.call(
                f"status of {key[1]} {namespace}/{name}",
                lambda: endpoint.replace(namespace, name, wanted),
            )
        )

    def create_job_pods(
        self, namespace: str, pods: Sequence[Doc], pod_group: Doc | None = None
    ) -> list[Doc]:
        """Create a job: its PodGroup (when given) first, then its pods under our scheduler.

        A pod that already exists is kept as it is (a repeated submit creates nothing twice).
        """
        if pod_group is not None:
            group = copy.deepcopy(pod_group)
            group.setdefault("metadata", {})["namespace"] = namespace
            self.apply_object(group)
        created = []
        for pod in pods:
            body = copy.deepcopy(pod)
            body.setdefault("apiVersion", "v1")
            body.setdefault("kind", "Pod")
            body.setdefault("metadata", {})["namespace"] = namespace
            body.setdefault("spec", {}).setdefault("schedulerName", self.scheduler_name)
            created.append(self._create_pod(namespace, body))
        return created

    def _create_pod(self, namespace: str, body: Doc) -> Doc:
        name = body["metadata"]["name"]
        what = f"create pod {namespace}/{name}"
        try:
            return _json(
                self.retry.call(
                    what,
                    lambda: self.core.create_namespaced_pod(
                        namespace, body, _preload_content=False
                    ),
                )
            )
        except ApiException as error:
            if error.status != 409:
                raise
        return _json(
            self.retry.call(
                what,
                lambda: self.core.read_namespaced_pod(name, namespace, _preload_content=False),
            )
        )


def gang_pods(
    job: str,
    template: Doc,
    count: int,
    *,
    min_available: int | None = None,
    mode: str = "Strict",
    annotations: dict[str, str] | None = None,
) -> list[Doc]:
    """`count` pods `<job>-<i>` from a pod template, joined by Koordinator gang annotations."""
    pods = []
    for index in range(count):
        pod = copy.deepcopy(template)
        metadata = pod.setdefault("metadata", {})
        metadata["name"] = f"{job}-{index}"
        metadata["annotations"] = {
            **(metadata.get("annotations") or {}),
            **(annotations or {}),
            GANG_NAME: job,
            GANG_MIN_AVAILABLE: str(min_available or count),
            GANG_TOTAL_NUMBER: str(count),
            GANG_MODE: mode,
        }
        pods.append(pod)
    return pods


def _json(answer: Any) -> Doc:
    return json.loads(answer.data)  # type: ignore[no-any-return]
