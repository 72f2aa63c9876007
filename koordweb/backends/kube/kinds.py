"""The kinds the backend mirrors from a cluster, and the client call that lists each of them.

Lists and watches are read as raw JSON (`_preload_content=False`, `Watch(return_type="object")`):
the documents are exactly what the API server sends, camelCase like a YAML manifest, and 20,000
pods are not pushed through the client's model classes on every sync.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from scheduler.vocabulary import (
    DEFAULT_POD_GROUP_API,
    K8S_SCHEDULING_API,
    KOORD_SCHEDULING_API,
    KOORD_SLO_API,
)

ListCall = Callable[..., Any]


@dataclass(frozen=True)
class WatchedKind:
    """One mirrored kind: its manifest identity and where to list it (all namespaces)."""

    name: str
    api_version: str
    kind: str
    plural: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def list_call(self, api_client: client.ApiClient) -> tuple[ListCall, tuple[str, ...]]:
        """The list function and its positional arguments, usable by `watch.Watch.stream`."""
        core = client.CoreV1Api(api_client)
        builtin: dict[str, ListCall] = {
            "nodes": core.list_node,
            "pods": core.list_pod_for_all_namespaces,
            "poddisruptionbudgets": (
                client.PolicyV1Api(api_client).list_pod_disruption_budget_for_all_namespaces
            ),
            "priorityclasses": client.SchedulingV1Api(api_client).list_priority_class,
            "configmaps": core.list_config_map_for_all_namespaces,
        }
        if self.plural in builtin:
            return builtin[self.plural], ()
        custom = client.CustomObjectsApi(api_client)
        return custom.list_cluster_custom_object, (self.group, self.version, self.plural)


WATCHED_KINDS: tuple[WatchedKind, ...] = (
    WatchedKind("nodes", "v1", "Node", "nodes"),
    WatchedKind("pods", "v1", "Pod", "pods"),
    WatchedKind("podgroups", DEFAULT_POD_GROUP_API, "PodGroup", "podgroups"),
    WatchedKind("devices", KOORD_SCHEDULING_API, "Device", "devices"),
    WatchedKind(
        "clusternetworktopologies",
        KOORD_SCHEDULING_API,
        "ClusterNetworkTopology",
        "clusternetworktopologies",
    ),
    WatchedKind("elasticquotas", DEFAULT_POD_GROUP_API, "ElasticQuota", "elasticquotas"),
    WatchedKind("nodemetrics", KOORD_SLO_API, "NodeMetric", "nodemetrics"),
    WatchedKind("poddisruptionbudgets", "policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    WatchedKind("priorityclasses", K8S_SCHEDULING_API, "PriorityClass", "priorityclasses"),
    # For koord-scheduler-config, the cluster's scheduler profile (other ConfigMaps are ignored).
    WatchedKind("configmaps", "v1", "ConfigMap", "configmaps"),
)


def object_key(doc: dict[str, Any]) -> tuple[str, str]:
    metadata = doc.get("metadata") or {}
    return metadata.get("namespace") or "", metadata.get("name") or ""
