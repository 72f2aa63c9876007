"""The resource types the fake API server serves, and how request paths map onto them.

A resource is addressed the way kube-apiserver addresses it: `/api/v1/...` for the core group,
`/apis/<group>/<version>/...` otherwise, with `namespaces/<ns>/` in front of namespaced plurals and
an optional subresource (`status`, `binding`, `eviction`) after the name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    """One served resource: where it lives, what it is called, which fields it may select on."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    field_labels: tuple[str, ...] = ("metadata.name", "metadata.namespace")
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The name used in error messages: `pods`, `elasticquotas.scheduling.sigs.k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


POD_FIELDS = (
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.schedulerName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)

# The field labels kube-apiserver selects core Events on (pkg/registry/core/event/strategy.go).
EVENT_FIELDS = (
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("metadata.name", "status.phase")),
    ResourceType("", "v1", "nodes", "Node", False, ("metadata.name", "spec.unschedulable")),
    ResourceType("", "v1", "pods", "Pod", True, POD_FIELDS),
    ResourceType("", "v1", "configmaps", "ConfigMap", True),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    ResourceType(
        "scheduling.koordinator.sh",
        "v1alpha1",
        "clusternetworktopologies",
        "ClusterNetworkTopology",
        False,
        custom=True,
    ),
    ResourceType("scheduling.koordinator.sh", "v1alpha1", "devices", "Device", False, custom=True),
    ResourceType(
        "scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota", True, custom=True
    ),
    ResourceType("scheduling.sigs.k8s.io", "v1alpha1", "podgroups", "PodGroup", True, custom=True),
    ResourceType("slo.koordinator.sh", "v1alpha1", "nodemetrics", "NodeMetric", False, custom=True),
    # Events: the core API (what client-go's record package writes and kubectl describe lists)
    # and events.k8s.io (kube-scheduler's events library); stored apart here.
    ResourceType("", "v1", "events", "Event", True, EVENT_FIELDS),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        (
            "metadata.name",
            "metadata.namespace",
            "reason",
            "type",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reportingController",
        ),
    ),
)

_BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCE_TYPES}
_BY_KIND = {(r.api_version, r.kind): r for r in RESOURCE_TYPES}
SUBRESOURCES = {"status", "binding", "eviction"}


def resource_for_kind(api_version: str, kind: str) -> ResourceType | None:
    return _BY_KIND.get((api_version, kind))


def served(api_version: str, kind: str) -> ResourceType:
    """A resource type the fake is known to serve (a KeyError names a typo)."""
    return _BY_KIND[(api_version, kind)]


@dataclass(frozen=True)
class Route:
    """A parsed request path: the resource, and which namespace/name/subresource it names."""

    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def parse_path(path: str) -> Route | None:
    """Map a request path to a route, or None when the server does not serve it (a 404)."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    # `namespaces/<ns>/<plural>...` scopes a namespaced resource; `namespaces[/<ns>[/status]]`
    # alone is the Namespace resource itself.
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    resource = _BY_PATH.get((group, version, rest[0]))
    if resource is None or (namespace is not None and not resource.namespaced):
        return None
    name = rest[1] if len(rest) > 1 else None
    if resource.namespaced and namespace is None and name is not None:
        return None
    subresource = rest[2] if len(rest) > 2 else None
    if subresource is not None and subresource not in SUBRESOURCES:
        return None
    if subresource in {"binding", "eviction"} and resource.plural != "pods":
        return None
    return Route(resource, namespace, name, subresource)
