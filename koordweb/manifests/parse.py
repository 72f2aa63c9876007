"""Documents -> a validated `ManifestSet`: dispatch on apiVersion/kind, refuse duplicates.

Nothing here touches the database; references to other objects are checked when applying.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordweb.manifests.errors import ManifestError
from koordweb.manifests.fields import At
from koordweb.manifests.jobs import build_jobs
from koordweb.manifests.loader import load_documents
from koordweb.manifests.objects import (
    CONFIG_MAP,
    DEVICE,
    NODE,
    NODE_METRIC,
    PDB,
    POD,
    POD_GROUP,
    PRIORITY_CLASS,
    QUOTA,
    TOPOLOGY,
    ManifestSet,
    ParsedObject,
)
from koordweb.manifests.parse_cluster import (
    parse_config_map,
    parse_device,
    parse_node,
    parse_node_metric,
    parse_priority_class,
    parse_topology,
)
from koordweb.manifests.parse_workload import parse_pdb, parse_pod, parse_pod_group, parse_quota
from scheduler.vocabulary import (
    DEFAULT_POD_GROUP_API,
    K8S_SCHEDULING_API,
    KOORD_SCHEDULING_API,
    KOORD_SLO_API,
    POD_GROUP_APIS,
)

Parser = Callable[[At], ParsedObject]


def _pod_group_parser(api_version: str) -> Parser:
    return lambda doc: parse_pod_group(doc, api_version)


# kind -> {apiVersion: parser}: every (apiVersion, kind) pair koordweb reads.
KINDS: dict[str, dict[str, Parser]] = {
    NODE: {"v1": parse_node},
    POD: {"v1": parse_pod},
    CONFIG_MAP: {"v1": parse_config_map},
    POD_GROUP: {api: _pod_group_parser(api) for api in POD_GROUP_APIS},
    PRIORITY_CLASS: {K8S_SCHEDULING_API: parse_priority_class},
    PDB: {"policy/v1": parse_pdb},
    TOPOLOGY: {KOORD_SCHEDULING_API: parse_topology},
    DEVICE: {KOORD_SCHEDULING_API: parse_device},
    QUOTA: {DEFAULT_POD_GROUP_API: parse_quota},
    NODE_METRIC: {KOORD_SLO_API: parse_node_metric},
}

# ElasticQuota names are unique in a cluster, not per namespace (the tree spans namespaces).
_CLUSTER_UNIQUE = {QUOTA}


def parse_document(index: int, document: Any) -> ParsedObject:
    """One document (already loaded) -> a validated object; `index` is 1-based."""
    doc = At(index, document)
    if not isinstance(document, Mapping):
        raise ManifestError(index, "<document>", "must be a mapping with apiVersion and kind")
    kind = doc.child("kind").string(required=True)
    api_version = doc.child("apiVersion").string(required=True)
    versions = KINDS.get(kind)
    if versions is None:
        doc.fail(f"unsupported kind {kind!r} (supported: {', '.join(sorted(KINDS))})", "kind")
    parser = versions.get(api_version)
    if parser is None:
        doc.fail(
            f"unsupported apiVersion {api_version!r} for {kind} "
            f"(use {' or '.join(sorted(versions))})",
            "apiVersion",
        )
    return parser(doc)


def parse_documents(documents: Iterable[Any], *, first_index: int = 1) -> ManifestSet:
    """Loaded documents -> a validated ManifestSet; empty documents (None) are skipped."""
    manifests = ManifestSet()
    seen: dict[tuple[str, str, str], int] = {}
    for index, document in enumerate(documents, start=first_index):
        if document is None:
            continue
        obj = parse_document(index, document)
        namespace = "" if obj.kind in _CLUSTER_UNIQUE else obj.namespace
        identity = (obj.kind, namespace, obj.name)
        if identity in seen:
            raise ManifestError(
                index,
                "metadata.name",
                f"duplicate {obj.kind} {obj.key!r} (also document {seen[identity]})",
            )
        seen[identity] = index
        manifests.objects.append(obj)
    build_jobs(manifests)
    return manifests


def parse_manifests(text: str | bytes) -> ManifestSet:
    """YAML text (one or many documents) -> a validated ManifestSet, or a ManifestError."""
    return parse_documents(load_documents(text))
