"""Worker subprocesses for the reliability tests, on the configured broker and the test database.

The workers are real `celery -A koordweb worker` processes. They reach the test database through
DATABASE_URL built from the test connection's settings: on PostgreSQL the `test_...` database; on
SQLite the test database file (settings name one per process; an in-memory one would live in this
process only, and the tests then skip).
Each test gets its own queue, so workers of other tests (or other checkouts sharing the broker)
never take its rounds. The fake API server runs in this process and is reached via a kubeconfig.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from tests.fakekube import FakeKube
from tests.reliability.cluster import cluster_seed, kubeconfig_write

ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """The test database as a DATABASE_URL for a subprocess."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        name = str(db["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            pytest.skip(
                "the SQLite test database is in memory: worker subprocesses cannot share it "
                "(settings give SQLite a file test database; use PostgreSQL otherwise)"
            )
        return f"sqlite:///{Path(name).resolve()}"
    if "postgresql" in db["ENGINE"]:
        user = quote(db.get("USER") or "", safe="")
        password = quote(db.get("PASSWORD") or "", safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = db.get("HOST") or "127.0.0.1"
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{quote(db['NAME'], safe='')}"
    pytest.skip(f"no subprocess DATABASE_URL for {db['ENGINE']}")


@dataclass
class Worker:
    """One `celery worker` subprocess (its own process group) and its log file."""

    process: subprocess.Popen[bytes]
    log: Path
    name: str

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in self.output():
                return
            if self.process.poll() is not None:
                raise AssertionError(f"worker {self.name} exited:\n{self.output()[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(
            f"worker {self.name} not ready in {timeout}s:\n{self.output()[-3000:]}"
        )

    def kill(self) -> None:
        """SIGKILL the whole worker (a prefork pool's children too): no cleanup of any kind."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 30) -> None:
        """A warm shutdown (SIGTERM): running rounds finish, then the worker exits."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Workers:
    """Starts workers for one test on one queue; every worker is gone when the test ends."""

    env: dict[str, str]
    queue: str
    logs: Path
    started: list[Worker] = field(default_factory=list)

    def start(self, pool: str = "solo", concurrency: int = 1) -> Worker:
        name = f"rel{len(self.started) + 1}-{uuid.uuid4().hex[:6]}"
        log = self.logs / f"{name}.log"
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "koordweb",
            "worker",
            f"--pool={pool}",
            f"--concurrency={concurrency}",
            f"--queues={self.queue}",
            f"--hostname={name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=INFO",
        ]
        with log.open("wb") as sink:
            process = subprocess.Popen(  # our interpreter, our arguments
                command,
                cwd=ROOT,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = Worker(process, log, name)
        self.started.append(worker)
        return worker

    def enqueue(self, cluster_id: int, trigger: str = "manual") -> None:
        from koordweb.tasks import run_round

        run_round.apply_async(args=[cluster_id], kwargs={"trigger": trigger}, queue=self.queue)

    def shutdown(self) -> None:
        for worker in self.started:
            worker.stop(timeout=20)
        self.purge()

    def purge(self) -> None:
        """Drop the round requests nobody took, so the shared broker keeps no debris."""
        from koordweb.celery import app

        with app.connection_for_write() as conn:
            channel = conn.default_channel
            channel.queue_declare(queue=self.queue, durable=True, auto_delete=False)
            channel.queue_purge(self.queue)
            channel.queue_delete(self.queue)
            options = conn.transport_options or {}
            filesystem = conn.transport_cls == "filesystem"
        if filesystem:
            # kombu's filesystem transport never deletes an exchange's table file (relative
            # to each process's working directory): remove the one our queue created.
            folder = Path(options.get("control_folder", "control"))
            for base in {ROOT, Path.cwd()}:
                (base / folder / f"{self.queue}.exchange").unlink(missing_ok=True)


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    # Listen on every loopback connection the workers open; the in-thread server is shared.
    with FakeKube() as fake:
        cluster_seed(fake)
        yield fake


@pytest.fixture
def workers(kube: FakeKube, tmp_path: Path) -> Iterator[Workers]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "REDIS_URL": getattr(settings, "REDIS_URL", ""),
        "KOORDWEB_VAR_DIR": str(settings.VAR_DIR),
        "KOORDWEB_BACKEND": "kubernetes",
        "KUBECONFIG": str(kubeconfig_write(tmp_path / "kubeconfig", kube.url)),
        "KOORDWEB_TESTING": "1",
        "SECRET_KEY": settings.SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
    }
    pool = Workers(env=env, queue=f"reliability-{uuid.uuid4().hex[:10]}", logs=tmp_path)
    try:
        yield pool
    finally:
        pool.shutdown()
