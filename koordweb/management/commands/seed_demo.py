"""`python manage.py seed_demo`: create the demo cluster (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from koordweb.services.demo import demo_seed


class Command(BaseCommand):
    help = "Create the demo cluster, its quotas, users and jobs (does nothing if it exists)."

    def handle(self, *args: Any, **options: Any) -> None:
        counts = demo_seed()
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.items())
        self.stdout.write(f"demo cluster ready: {summary}")
