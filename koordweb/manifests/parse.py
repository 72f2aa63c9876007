"""Documents -> a validated `ManifestSet`: dispatch on apiVersion/kind, refuse duplicates.

A cluster's dump (`kubectl get ... -A -o yaml`) reads as it is: a `kind: List` document (or a
`PodList`, `NodeList`, ...) is unwrapped into its items; kinds koordweb does not use (Services,
Deployments, Events, ConfigMaps that are neither the scheduler's configuration nor device
templates, ...) are skipped and counted in one warning; an unknown kind that looks like a
misspelling of one koordweb reads, in the same API group (`Nod`, `Podd`), is still refused.

Nothing here touches the database; references to other objects are checked when applying.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from koordweb.manifests.errors import DocumentNumber, ManifestError
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
    is_config_map_read,
    parse_config_map,
    parse_device,
    parse_node,
    parse_node_metric,
    parse_priority_class,
    parse_topology,
)
from koordweb.manifests.parse_workload import parse_pdb, parse_pod, parse_pod_group, parse_quota
from scheduler.vocabulary import (
    CORE_V1_KINDS,
    DEFAULT_POD_GROUP_API,
    K8S_SCHEDULING_API,
    KOORD_SCHEDULING_API,
    KOORD_SLO_API,
    LIST_KIND,
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
# How alike an unknown kind and one koordweb reads must be to be taken for a misspelling: `Nod`,
# `Podd`, `PodGroups`; not `Service` or `Role`.
_MISSPELT_CUTOFF = 0.8


def _group(api_version: Any) -> str | None:
    """The API group of an apiVersion (`""` for the core `v1`); None when it is not a string."""
    if not isinstance(api_version, str):
        return None
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def _kinds_by_group() -> dict[str | None, list[str]]:
    found: dict[str | None, list[str]] = {}
    for kind, versions in KINDS.items():
        for group in {_group(api) for api in versions}:
            found.setdefault(group, []).append(kind)
    return found


_GROUP_KINDS = _kinds_by_group()


def misspelt_kind(kind: str, api_version: Any) -> str:
    """The kind koordweb reads that `kind`, unknown, is a misspelling of, in the same API group
    (case aside, or close by `difflib`'s ratio); "" when it looks like a kind of its own."""
    known = _GROUP_KINDS.get(_group(api_version), [])
    by_lower = {name.lower(): name for name in known}
    close = difflib.get_close_matches(kind.lower(), list(by_lower), n=1, cutoff=_MISSPELT_CUTOFF)
    return by_lower[close[0]] if close else ""


def unused_kind(index: int, document: Any) -> str:
    """The kind of a document koordweb does not use, to skip; "" for one it reads (or one too
    broken to tell: parsing it names the problem). A misspelt kind is refused, naming the
    kind it is taken for."""
    if not isinstance(document, Mapping):
        return ""
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        return ""
    if kind in KINDS:
        return "" if kind != CONFIG_MAP or is_config_map_read(document) else kind
    meant = misspelt_kind(kind, document.get("apiVersion"))
    if meant:
        raise ManifestError(index, "kind", f"unknown kind {kind!r} (did you mean {meant!r}?)")
    if _group(document.get("apiVersion")) == "" and kind not in CORE_V1_KINDS:
        raise ManifestError(index, "kind", f"unsupported kind {kind!r}: not a kind of the v1 API")
    return kind


def _is_list(document: Any) -> bool:
    """`kind: List`, or a typed list such as `PodList` holding `items`."""
    if not isinstance(document, Mapping):
        return False
    kind = document.get("kind")
    return isinstance(kind, str) and (
        kind == LIST_KIND or (kind.endswith(LIST_KIND) and "items" in document)
    )


def unwrapped(documents: Iterable[Any], first_index: int = 1) -> Iterator[tuple[int, Any]]:
    """(document number, document) for every document, a List's items in its place, each
    numbered by the List's position and its own index in `items`."""
    for index, document in enumerate(documents, start=first_index):
        if not _is_list(document):
            yield DocumentNumber(index), document
            continue
        items = document.get("items")
        if items is None:
            continue  # an empty list, as kubectl prints it when nothing matched
        if not isinstance(items, list):
            raise ManifestError(index, "items", "must be a list")
        for position, item in enumerate(items):
            number = DocumentNumber(index, position)
            if _is_list(item):
                raise ManifestError(number, "kind", "a List inside a List is not read")
            yield number, item


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
    """Loaded documents -> a validated ManifestSet; empty documents (None) are skipped, Lists
    unwrapped, kinds koordweb does not use counted in `skipped`."""
    manifests = ManifestSet()
    seen: dict[tuple[str, str, str], int] = {}
    for index, document in unwrapped(documents, first_index):
        if document is None:
            continue
        skipped = unused_kind(index, document)
        if skipped:
            manifests.skipped[skipped] += 1
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
    if manifests.skipped and not manifests.objects:
        kinds = ", ".join(sorted(manifests.skipped))
        raise ManifestError(
            first_index,
            "kind",
            f"nothing here koordweb reads: only kinds it does not use ({kinds})",
        )
    build_jobs(manifests)
    return manifests


def parse_manifests(text: str | bytes) -> ManifestSet:
    """YAML text (one or many documents) -> a validated ManifestSet, or a ManifestError."""
    return parse_documents(load_documents(text))
