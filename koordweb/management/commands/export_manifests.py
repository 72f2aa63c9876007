"""`manage.py export_manifests [-o FILE] [--cluster NAME]`: a cluster as multi-document YAML.

The order is stable (kinds that others refer to first, then by name), so two exports of the
same state are byte-identical and the output imports back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from koordweb.manifests import dump_manifests, export_manifests
from koordweb.models import Cluster


class Command(BaseCommand):
    help = "Export a cluster's objects as Kubernetes/Koordinator YAML."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
        parser.add_argument("--cluster", default="default", help="cluster name")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = Cluster.objects.get(name=options["cluster"])
        except Cluster.DoesNotExist as exc:
            raise CommandError(f"no cluster named {options['cluster']!r}", returncode=2) from exc
        text = dump_manifests(export_manifests(cluster))
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")
