"""`python manage.py round_owners`: the round workers and which one owns each cluster's rounds."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from koordweb.selectors.leases import cluster_owners, round_workers
from koordweb.services.leases import db_now


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "-"


class Command(BaseCommand):
    help = "List the round workers (alive or not, their queues) and each cluster's lease owner."

    def handle(self, *args: Any, **options: Any) -> None:
        now = db_now()
        owned: dict[str, list[str]] = {}
        leases = cluster_owners(now)
        for lease in leases:
            if lease.owner and lease.alive:
                owned.setdefault(lease.owner, []).append(lease.cluster)
        self.stdout.write("workers:")
        for worker in round_workers():
            state = "alive" if worker.expires_at > now else "dead"
            clusters = ", ".join(owned.get(worker.name, [])) or "-"
            self.stdout.write(
                f"  {worker.name}  {state}  queue {worker.queue}  host {worker.host} pid "
                f"{worker.pid}  last seen {_when(worker.seen_at)}  clusters: {clusters}"
            )
        self.stdout.write("clusters:")
        for lease in leases:
            owner = lease.owner or "unowned"
            expired = lease.owner and not lease.alive
            state = " (expired: moves at the next heartbeat)" if expired else ""
            self.stdout.write(
                f"  {lease.cluster}  {owner}{state}  generation {lease.generation}  since "
                f"{_when(lease.acquired_at)}  renewed until {_when(lease.expires_at)}"
            )
