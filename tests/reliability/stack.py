"""The reliability tests' processes: real celery workers (`Workers`) and the production-like
stack (`AppStack`: gunicorn and a worker with beat on a broker of its own), both on the test
database, and the clients that load them (`Submitter`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

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
        """Drop the round requests nobody took, so the shared broker keeps no debris: this test's
        queue and its workers' own queues."""
        from koordweb.models import RoundWorker
        from koordweb.worker_queues import worker_queues_remove

        worker_queues_remove([self.queue, *RoundWorker.objects.values_list("queue", flat=True)])


# --- the stack: a broker of its own, gunicorn and a worker with beat ---


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


@dataclass
class Broker:
    """Where the stack's broker and cache live: a private redis-server or a directory."""

    url: str
    redis_url: str
    label: str
    redis: subprocess.Popen[bytes] | None = None
    redis_port: int = 0
    redis_args: list[str] = field(default_factory=list)

    def redis_stop(self) -> None:
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(timeout=20)

    def redis_start(self) -> None:
        self.redis = subprocess.Popen(
            self.redis_args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_port(self.redis_port, 20, self.redis)


@contextlib.contextmanager
def private_broker(tmp: Path, *, redis: bool | None = None) -> Iterator[Broker]:
    """A redis-server on a free port when the suite runs on Redis (or `redis`), else a dir."""
    from django.conf import settings

    if redis is None:
        redis = settings.CELERY_BROKER_URL.startswith("redis")
    binary = shutil.which("redis-server")
    if not redis or binary is None:
        if redis:
            pytest.skip("redis-server is not installed")
        yield Broker(url="filesystem://", redis_url="", label="filesystem (private var dir)")
        return
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    args += ["no", "--dir", str(tmp)]
    broker = Broker(
        url=f"redis://127.0.0.1:{port}/0",
        redis_url=f"redis://127.0.0.1:{port}/1",
        label="redis-server (private)",
        redis_port=port,
        redis_args=args,
    )
    broker.redis_start()
    try:
        yield broker
    finally:
        broker.redis_stop()


# The outage middleware, inserted for the stack when settings do not list it yet (the lead wires
# it into settings.MIDDLEWARE right after SecurityMiddleware; this file is written to tmp only).
GUNICORN_CONFIG = """
def post_fork(server, worker):
    from django.conf import settings
    name = "koordweb.outage.OutageMiddleware"
    if name not in settings.MIDDLEWARE:
        settings.MIDDLEWARE = [settings.MIDDLEWARE[0], name, *settings.MIDDLEWARE[1:]]
"""


class AppStack:
    """gunicorn + one `celery worker -B`, on the test database (or `database_url`)."""

    def __init__(self, tmp: Path, broker: Broker, database: str | None = None) -> None:
        self.tmp = tmp
        self.var = tmp / "var"
        self.var.mkdir(exist_ok=True)
        db = database or database_url()
        self.database_label = db.split("@")[-1] if "@" in db else "sqlite (test database file)"
        self.env = {
            **os.environ,
            "DATABASE_URL": db,
            "CELERY_BROKER_URL": broker.url,
            "REDIS_URL": broker.redis_url,
            "KOORDWEB_VAR_DIR": str(self.var),
            "KOORDWEB_BACKEND": "simulated",
            "DJANGO_SETTINGS_MODULE": "koordweb.settings.test",
            "KOORDWEB_HTTPS": "0",
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            "KOORDWEB_LOG_FORMAT": "plain",
            "PYTHONUNBUFFERED": "1",
        }
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _spawn(self, name: str, command: list[str], env: dict[str, str]) -> None:
        with (self.tmp / f"{name}.log").open("ab") as sink:
            self.processes[name] = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start_web(self, workers: int = 2) -> None:
        self.port = free_port()
        config = self.tmp / "gunicorn.conf.py"
        config.write_text(GUNICORN_CONFIG)
        command = [sys.executable, "-m", "gunicorn", "koordweb.wsgi", "-c", str(config)]
        command += ["-b", f"127.0.0.1:{self.port}", "-w", str(workers), "--timeout", "60"]
        self._spawn("gunicorn", command, self.env)
        wait_port(self.port, 60, self.processes["gunicorn"])

    def start_worker(self, beat_seconds: float = 1.0) -> None:
        env = {**self.env, "KOORDWEB_ROUND_INTERVAL": str(beat_seconds)}
        command = [sys.executable, "-m", "celery", "-A", "koordweb", "worker", "-B"]
        command += ["--pool=solo", "--without-gossip", "--without-mingle", "--loglevel=WARNING"]
        command += ["-s", str(self.tmp / "beat-schedule")]
        self._spawn("worker", command, env)

    def logs_tail(self, chars: int = 3000) -> str:
        parts = []
        for name in self.processes:
            text = (self.tmp / f"{name}.log").read_text(errors="replace")
            parts.append(f"--- {name} ---\n{text[-chars:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, 15)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait(timeout=10)

    def __enter__(self) -> AppStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Submission:
    key: str
    status: int  # 0: no answer (connection refused or reset)
    job_id: int | None
    seconds: float
    body: str = ""
    retry_after: str | None = None
    at: float = 0.0


class Submitter:
    """POST /api/v1/jobs/ with a token; one small job per Idempotency-Key (named after it)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = f"{url}/api/v1/jobs/"
        self.token = token

    def submit(self, key: str, retries: int = 0) -> Submission:
        body = json.dumps(
            {
                "name": f"load-{key.lower()}",
                "quota": "team-a",
                "replicas": 1,
                "pod": {"requests": {"cpu": "1", "memory": "1Gi"}},
                "duration_seconds": 3600,
            }
        ).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={
                "Authorization": f"Token {self.token}",
                "Content-Type": "application/json",
                "Idempotency-Key": key,
            },
        )
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, text, retry_after = answer.status, answer.read().decode(), None
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode(errors="replace")
            retry_after = error.headers.get("Retry-After")
        except (OSError, urllib.error.URLError) as error:
            status, text, retry_after = 0, repr(error), None
        seconds = time.monotonic() - t0
        job_id = None
        if status in (200, 201):
            job_id = int(json.loads(text)["id"])
        return Submission(key, status, job_id, seconds, text[:300], retry_after, time.monotonic())
