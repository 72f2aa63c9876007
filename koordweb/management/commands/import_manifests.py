"""`manage.py import_manifests FILE... [--cluster NAME]`: load Kubernetes/Koordinator YAML.

All files are read and validated first, then written in one transaction (the cluster is created
if missing, inside it). Bad input exits with code 2 and one line naming the document and the
field; nothing is written. Documents are numbered across all files, in the order given.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from tqdm import tqdm

from koordweb.manifests import (
    MAX_MANIFEST_BYTES,
    ManifestError,
    apply_manifests,
    load_documents,
    parse_documents,
)
from koordweb.models import Cluster

_CLUSTER_NAME_RE = re.compile(r"[-a-zA-Z0-9_]{1,63}")
# Files smaller than this load in a blink; a progress bar would only add noise.
PROGRESS_FROM_BYTES = 256 * 1024


class Command(BaseCommand):
    help = "Import Kubernetes/Koordinator YAML (Node, Pod, PodGroup, ...) into a cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="multi-document YAML files")
        parser.add_argument("--cluster", default="default", help="cluster (created if missing)")

    def handle(self, *args: Any, **options: Any) -> None:
        cluster_name: str = options["cluster"]
        if not _CLUSTER_NAME_RE.fullmatch(cluster_name):
            raise CommandError(
                f"--cluster: {cluster_name!r} is not a slug of at most 63 characters", returncode=2
            )
        documents: list[Any] = []
        for name in options["files"]:
            documents.extend(self._read(Path(name), first_index=len(documents) + 1))
        try:
            manifests = parse_documents(documents)
            with transaction.atomic():
                cluster, _ = Cluster.objects.get_or_create(name=cluster_name)
                counts = apply_manifests(cluster, manifests)
        except ManifestError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        summary = ", ".join(f"{kind}: {count}" for kind, count in counts.items()) or "nothing"
        self.stdout.write(f"imported into cluster {cluster_name!r}: {summary}")
        for warning in manifests.warnings:
            self.stderr.write(f"warning: {warning}")

    def _read(self, path: Path, *, first_index: int) -> list[Any]:
        """The documents of one file; errors name the file and the stream-wide document index."""
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
        bar = tqdm(
            total=len(data),
            desc=f"reading {path.name}",
            unit="B",
            unit_scale=True,
            file=sys.stderr,
            disable=len(data) < PROGRESS_FROM_BYTES,
        )

        def advance(done: int, total: int) -> None:
            # The loader counts characters; scale them to the file's bytes for the bar.
            bar.update(round(done * len(data) / max(total, 1)) - bar.n)

        try:
            with bar:
                return load_documents(data, progress=advance)
        except ManifestError as exc:
            index = None if exc.index is None else exc.index + first_index - 1
            raise CommandError(
                f"{path}: {ManifestError(index, exc.field, exc.message)}", returncode=2
            ) from exc
