"""`python manage.py seed_demo`: create the demo cluster (idempotent)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from koordweb.models import Cluster
from koordweb.services.demo import demo_seed


class Command(BaseCommand):
    help = "Create the demo cluster, its quotas, users and jobs (does nothing if it exists)."

    def handle(self, *args: Any, **options: Any) -> None:
        counts = demo_seed()
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.items())
        self.stdout.write(f"demo cluster ready: {summary}")
        backend = Cluster.objects.get(name=settings.KOORDWEB_CLUSTER).backend
        if backend != settings.KOORDWEB_BACKEND:
            self.stderr.write(
                f"cluster {settings.KOORDWEB_CLUSTER!r} exists on the {backend} backend, not "
                f"KOORDWEB_BACKEND={settings.KOORDWEB_BACKEND}: change it in the admin (Clusters) "
                "or seed another KOORDWEB_VAR_DIR / DATABASE_URL"
            )
