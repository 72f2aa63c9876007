"""Cluster-affine workers: two real worker processes, three clusters, beat, and a SIGKILL.

Two `celery worker` subprocesses and one `celery beat` share the test database and the configured
broker (SQLite + the filesystem broker locally; PostgreSQL + Redis in CI), on a queue of this test's
own (KOORDWEB_QUEUE) and a short round interval. Checked from the Round rows (start, end, the worker
that ran each) and the leases:
- the clusters are shared between the workers, and every cluster's rounds run on its lease owner:
  a cluster's rounds change worker only when its lease changed owner (its generation);
- no two rounds of one cluster overlap;
- SIGKILL the worker owning two clusters: the other one takes them over (a new lease generation,
  acquired within one round interval of the dead lease's expiry) and runs their rounds.
Waits are conditions with deadlines; the measured failover is printed, not asserted as a speed.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.conf import settings
from django.utils import timezone

from koordweb.models import Cluster, ClusterLease, Round, RoundWorker
from tests.reliability.stack import ROOT, Worker, database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

INTERVAL = 3.0  # seconds between beat's rounds of every cluster
LEASE = 1.5  # a worker's heartbeat renews its leases every LEASE / 3
T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float, what: str, logs: Callable[[], str]) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout}s\n{logs()[-6000:]}")


@dataclass
class Fleet:
    """Worker and beat subprocesses on this test's queue; all gone when the test ends."""

    env: dict[str, str]
    queue: str
    logs: Path
    workers: list[Worker] = field(default_factory=list)
    beat: Worker | None = None

    def _spawn(self, name: str, command: list[str]) -> Worker:
        log = self.logs / f"{name}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(  # our interpreter, our arguments
                [sys.executable, "-m", "celery", "-A", "koordweb", *command],
                cwd=ROOT,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return Worker(process, log, name)

    def start_worker(self) -> Worker:
        name = f"aff{len(self.workers) + 1}-{uuid.uuid4().hex[:6]}"
        worker = self._spawn(
            name,
            [
                "worker",
                "--pool=solo",
                f"--hostname={name}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=INFO",
            ],
        )
        self.workers.append(worker)
        return worker

    def start_beat(self) -> None:
        self.beat = self._spawn(
            "beat", ["beat", f"--schedule={self.logs / 'beat-schedule'}", "--loglevel=INFO"]
        )

    def output(self) -> str:
        parts = [w.output() for w in self.workers] + ([self.beat.output()] if self.beat else [])
        return "\n----\n".join(parts)

    def shutdown(self) -> None:
        if self.beat is not None:
            self.beat.stop(timeout=10)
        for worker in self.workers:
            worker.stop(timeout=20)
        self.purge()

    def purge(self) -> None:
        """Drop what nobody took: this test's queue and every worker's own queue."""
        from koordweb.worker_queues import worker_queues_remove

        worker_queues_remove([self.queue, *RoundWorker.objects.values_list("queue", flat=True)])


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    queue = f"affinity-{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "REDIS_URL": getattr(settings, "REDIS_URL", ""),
        "KOORDWEB_VAR_DIR": str(settings.VAR_DIR),
        "KOORDWEB_BACKEND": "simulated",
        "KOORDWEB_QUEUE": queue,
        "KOORDWEB_AFFINITY": "true",
        "KOORDWEB_ROUND_INTERVAL": str(INTERVAL),
        "KOORDWEB_LEASE_SECONDS": str(LEASE),
        "DJANGO_SETTINGS_MODULE": "koordweb.settings.test",
        "SECRET_KEY": settings.SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("KOORDWEB_WORKER_NAME", None)
    pool = Fleet(env=env, queue=queue, logs=tmp_path)
    try:
        yield pool
    finally:
        pool.shutdown()


def finished(cluster: Cluster, since: datetime | None = None) -> list[Round]:
    """The cluster's finished rounds (tagged with their worker), oldest first."""
    rounds = Round.objects.filter(cluster=cluster).exclude(state=Round.State.RUNNING)
    rounds = rounds.exclude(worker="")
    if since is not None:
        rounds = rounds.filter(started_at__gt=since)
    return list(rounds.order_by("started_at", "id"))


def overlaps(cluster: Cluster) -> list[tuple[Any, Any]]:
    """Pairs of consecutive rounds of the cluster whose [start, end] intervals overlap."""
    rounds = list(
        Round.objects.filter(cluster=cluster, finished_at__isnull=False).order_by("started_at")
    )
    return [
        (a.id, b.id)
        for a, b in itertools.pairwise(rounds)
        if a.finished_at is not None and b.started_at < a.finished_at
    ]


def worker_switches(cluster: Cluster) -> int:
    workers = [r.worker for r in finished(cluster)]
    return sum(1 for a, b in itertools.pairwise(workers) if a != b)


def test_two_workers_three_clusters_one_owner_each_and_failover(fleet: Fleet):
    first, second = fleet.start_worker(), fleet.start_worker()
    first.wait_ready()
    second.wait_ready()
    names = {w.name: w for w in (first, second)}
    wait_for(
        lambda: RoundWorker.objects.filter(expires_at__gt=timezone.now()).count() == 2,
        30,
        "both workers alive in the database",
        fleet.output,
    )
    clusters = [Cluster.objects.create(name=f"affine-{i}") for i in range(3)]
    fleet.start_beat()

    # Every cluster owned, by both workers between them, and a few rounds of each on its owner.
    def settled() -> bool:
        leases = list(ClusterLease.objects.filter(cluster__in=clusters))
        owners = {lease.owner_id for lease in leases}
        return (
            len(leases) == 3
            and None not in owners
            and len(owners) == 2
            and all(len(finished(c)) >= 3 for c in clusters)
        )

    wait_for(settled, 90, "three clusters shared by two workers, 3 rounds each", fleet.output)
    leases = {
        lease.cluster_id: lease for lease in ClusterLease.objects.filter(cluster__in=clusters)
    }
    for cluster in clusters:
        rounds = finished(cluster)
        owner = leases[cluster.id].owner_id
        assert owner is not None and owner.split("@")[0] in names
        # One worker at a time: a change of worker only where the lease changed owner.
        assert worker_switches(cluster) <= leases[cluster.id].generation - 1, [
            (r.id, r.worker) for r in rounds
        ]
        assert rounds[-1].worker == owner
        assert all(r.state == Round.State.SUCCEEDED for r in rounds), [r.error for r in rounds]
        assert overlaps(cluster) == []
    load: dict[str, list[Cluster]] = {}
    for cluster in clusters:
        load.setdefault(str(leases[cluster.id].owner_id), []).append(cluster)
    assert sorted(len(v) for v in load.values()) == [1, 2]

    # SIGKILL the worker owning two clusters: no cleanup, its leases simply stop being renewed.
    victim_name = next(name for name, owned in load.items() if len(owned) == 2)
    moved = load[victim_name]
    victim = names[victim_name.split("@")[0]]
    survivor = next(w for w in (first, second) if w is not victim)
    killed_at = timezone.now()
    victim.kill()
    dead = {lease.cluster_id: lease for lease in ClusterLease.objects.filter(cluster__in=moved)}

    def taken_over() -> bool:
        return all(
            ClusterLease.objects.get(cluster=c).owner_id not in (None, victim_name)
            and any(r.worker != victim_name for r in finished(c, since=killed_at))
            for c in moved
        )

    wait_for(taken_over, 60, "the dead worker's clusters running on the survivor", fleet.output)
    survivor_name = next(name for name in load if name != victim_name)
    assert survivor_name.split("@")[0] == survivor.name
    failover: list[float] = []
    for cluster in moved:
        lease = ClusterLease.objects.get(cluster=cluster)
        before = dead[cluster.id]
        assert lease.owner_id == survivor_name
        assert lease.generation == before.generation + 1  # one hand-over, by compare-and-set
        assert lease.acquired_at is not None and before.expires_at is not None
        # Claimed within one round interval of the dead lease's expiry.
        assert lease.acquired_at - before.expires_at <= timedelta(seconds=INTERVAL), (
            lease.acquired_at,
            before.expires_at,
        )
        after = finished(cluster, since=killed_at)
        assert after and all(
            r.worker == survivor_name for r in after if r.started_at > lease.acquired_at
        )
        first_round = next(r for r in after if r.worker == survivor_name)
        failover.append((first_round.started_at - killed_at).total_seconds())
    # The survivor's own cluster kept its owner throughout.
    kept = load[survivor_name][0]
    assert ClusterLease.objects.get(cluster=kept).owner_id == survivor_name
    # No more timed rounds: every round started after the kill ends (only a round the kill
    # interrupted may stay RUNNING), and none overlaps another of its cluster.
    assert fleet.beat is not None
    fleet.beat.stop(timeout=10)
    wait_for(
        lambda: (
            not Round.objects.filter(
                cluster__in=clusters, started_at__gt=killed_at, state=Round.State.RUNNING
            ).exists()
        ),
        60,
        "the survivor's rounds finished",
        fleet.output,
    )
    for cluster in clusters:
        assert overlaps(cluster) == [], cluster.name
        assert all(r.worker == survivor_name for r in finished(cluster, since=killed_at))
    print(
        f"\nfailover (kill -> first round on the survivor), lease {LEASE}s, interval "
        f"{INTERVAL}s: " + ", ".join(f"{s:.2f}s" for s in failover)
    )
