"""Kubernetes/Koordinator YAML <-> model rows (import and export).

Two steps, so callers can validate before they write:

    manifests = parse_manifests(text)            # safe YAML, validated objects, no database
    counts = apply_manifests(cluster, manifests)  # rows, inside the caller's transaction

`import_manifests(cluster, documents)` does both for loaded documents in one transaction;
`export_manifests(cluster)` is the inverse, `dump_manifests(documents)` writes the YAML text.
Every bad input raises ManifestError (a ValueError) naming the document index and the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from koordweb.manifests.apply import apply_manifests
from koordweb.manifests.errors import ManifestError
from koordweb.manifests.export import dump_manifests, export_manifests, topology_detail_status
from koordweb.manifests.loader import MAX_MANIFEST_BYTES, load_documents
from koordweb.manifests.objects import JobPlan, ManifestSet, ParsedObject
from koordweb.manifests.parse import parse_documents, parse_manifests
from koordweb.models import Cluster

__all__ = [
    "MAX_MANIFEST_BYTES",
    "JobPlan",
    "ManifestError",
    "ManifestSet",
    "ParsedObject",
    "apply_manifests",
    "dump_manifests",
    "export_manifests",
    "import_manifests",
    "load_documents",
    "parse_documents",
    "parse_manifests",
    "topology_detail_status",
]


def import_manifests(cluster: Cluster, documents: Iterable[Any]) -> dict[str, int]:
    """Validate and write loaded documents into `cluster`, all or nothing, in one transaction."""
    manifests = parse_documents(documents)
    with transaction.atomic():
        return apply_manifests(cluster, manifests)
