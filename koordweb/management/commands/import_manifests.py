"""`manage.py import_manifests FILE... [--cluster NAME]`: load Kubernetes/Koordinator YAML.

All files are validated first, then written in one transaction (the cluster is created if
missing, inside it). Bad input exits with code 2 and one line naming the document and the field;
nothing is written. Documents are numbered across all files, in the order given.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from tqdm import tqdm

from koordweb.manifests import MAX_MANIFEST_BYTES, ManifestError, load_documents, parse_documents
from koordweb.manifests.apply import apply_manifests
from koordweb.models import Cluster

# Files smaller than this load in a blink; a progress bar would only add noise.
_PROGRESS_FROM_BYTES = 256 * 1024


class Command(BaseCommand):
    help = "Import Kubernetes/Koordinator YAML (Node, Pod, PodGroup, ...) into a cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="multi-document YAML files")
        parser.add_argument(
            "--cluster", default="default", help="cluster name (created if missing)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        paths = [Path(name) for name in options["files"]]
        cluster_name: str = options["cluster"]
        try:
            documents = self._load(paths)
            progress = tqdm(
                total=len(documents),
                desc="validating",
                unit="doc",
                file=sys.stderr,
                disable=sum(p.stat().st_size for p in paths) < _PROGRESS_FROM_BYTES,
            )
            with progress:
                manifests = parse_documents(_counted(documents, progress))
            with transaction.atomic():
                cluster, _ = Cluster.objects.get_or_create(name=cluster_name)
                counts = apply_manifests(cluster, manifests)
        except ManifestError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        summary = ", ".join(f"{kind}: {count}" for kind, count in counts.items()) or "nothing"
        self.stdout.write(f"imported into cluster {cluster_name!r}: {summary}")

    def _load(self, paths: list[Path]) -> list[Any]:
        documents: list[Any] = []
        for path in paths:
            try:
                size = path.stat().st_size
                if size > MAX_MANIFEST_BYTES:
                    raise CommandError(
                        f"{path}: size: {size} bytes is over the {MAX_MANIFEST_BYTES} limit",
                        returncode=2,
                    )
                data = path.read_bytes()
            except OSError as exc:
                raise CommandError(f"{path}: {exc.strerror}", returncode=2) from exc
            try:
                loaded = load_documents(data)
            except ManifestError as exc:
                # Number documents across files, and say which file.
                index = None if exc.index is None else exc.index + len(documents)
                raise CommandError(
                    f"{path}: {ManifestError(index, exc.field, exc.message)}", returncode=2
                ) from exc
            documents.extend(loaded)
        return documents


def _counted(documents: list[Any], progress: tqdm) -> Any:
    for document in documents:
        yield document
        progress.update(1)
