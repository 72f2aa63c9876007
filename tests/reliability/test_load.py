"""Load (issue #9 item 1): many clients submitting through gunicorn while rounds run.

The app runs as in production: `gunicorn koordweb.wsgi -w 2` on a free 127.0.0.1 port and a
`celery worker -B` (timed rounds every second, plus the round each submission asks for), both on
the test database and on a broker and cache of their own (a private redis-server on a free port
when the suite runs on Redis, a filesystem broker in a temp dir otherwise), so nothing of another
test run takes their tasks. Client threads POST /api/v1/jobs/ with Idempotency-Keys, half of the
submissions reusing a key another thread has just sent. Checked: every answer 200/201 (0 5xx),
jobs created = unique keys, every key answered with one job id, 0 failed rounds.

`KOORDWEB_LOAD_CLIENTS` x `KOORDWEB_LOAD_SUBMISSIONS` sets the load (CI: 8 x 40; the benchmark
benchmarks/reliability_load.py runs 8 x 250); `KOORDWEB_RELIABILITY_RESULTS` names a JSON file
for the figures. The stack helpers here are shared with test_restarts.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from koordweb.models import Job, Round
from tests import builders as f
from tests.reliability.conftest import ROOT, database_url

pytestmark = pytest.mark.django_db(transaction=True)
CLIENTS = int(os.environ.get("KOORDWEB_LOAD_CLIENTS", "8"))
SUBMISSIONS = int(os.environ.get("KOORDWEB_LOAD_SUBMISSIONS", "40"))


# --- the stack: a broker of its own, gunicorn and a worker with beat (shared with restarts) ---


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
            "KOORDWEB_TESTING": "1",
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


@dataclass
class LoadWorld:
    cluster: Any
    tokens: list[str]


def load_world(clients: int = 8) -> LoadWorld:
    """A cluster of four 64-CPU nodes, quota team-a for one user, one API token per client."""
    from koordweb.services.tokens import token_create

    cluster = f.ClusterFactory(name="default")
    for i in range(4):
        f.NodeFactory(cluster=cluster, name=f"node-{i}")
    user = f.UserFactory(username="loader")
    root = f.QuotaFactory(cluster=cluster, name="root", is_parent=True)
    f.QuotaFactory(
        cluster=cluster,
        name="team-a",
        parent=root,
        members=[user],
        min={"cpu": 64000},
        max={"cpu": 10**9},
    )
    f.PriorityClassFactory(cluster=cluster, name="koord-batch", value=5000, global_default=True)
    return LoadWorld(cluster, [token_create(user=user)[1] for _ in range(clients)])


def percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(pct / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def key_plan(client: int, count: int, clients: int) -> list[str]:
    """Keys client `client` sends: even positions new, odd ones the neighbour's previous key.

    The neighbour sends that key at about the same moment, so replays race the first submission
    as well as follow it.
    """
    keys = []
    for j in range(count):
        if j % 2 == 0:
            keys.append(f"k{client}-{j}")
        else:
            keys.append(f"k{(client + 1) % clients}-{j - 1}")
    return keys


def test_load_through_gunicorn(tmp_path: Path) -> None:
    world = load_world()
    plans = [key_plan(i, SUBMISSIONS, CLIENTS) for i in range(CLIENTS)]
    unique_keys = {key for plan in plans for key in plan}
    with private_broker(tmp_path) as broker, AppStack(tmp_path, broker) as stack:
        stack.start_web(workers=2)
        stack.start_worker(beat_seconds=1.0)
        before = timezone.now()
        results: list[list[Submission]] = [[] for _ in range(CLIENTS)]
        errors: list[BaseException] = []

        def client(index: int) -> None:
            try:
                submitter = Submitter(stack.url, world.tokens[index % len(world.tokens)])
                for key in plans[index]:
                    results[index].append(submitter.submit(key, retries=0))
            except BaseException as exc:  # reported below; a thread cannot fail the test
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        t0 = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        wall = time.monotonic() - t0
        assert not errors, errors
        # Rounds keep running after the burst: wait for one that started after the last answer.
        last_answer = timezone.now()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if Round.objects.filter(cluster=world.cluster, started_at__gt=last_answer).exists():
                break
            time.sleep(0.5)
        stack.stop()

    answers = [s for client_results in results for s in client_results]
    codes: dict[int, int] = {}
    for s in answers:
        codes[s.status] = codes.get(s.status, 0) + 1
    ids_by_key: dict[str, set[int]] = {}
    for s in answers:
        if s.job_id is not None:
            ids_by_key.setdefault(s.key, set()).add(s.job_id)
    jobs = Job.objects.filter(cluster=world.cluster, idempotency_key__in=unique_keys)
    job_ids_by_key: dict[str, list[int]] = {}
    for key, job_id in jobs.values_list("idempotency_key", "id"):
        job_ids_by_key.setdefault(str(key), []).append(job_id)
    rounds = Round.objects.filter(cluster=world.cluster, started_at__gte=before)
    latencies = sorted(s.seconds for s in answers)
    figures: dict[str, Any] = {
        "clients": CLIENTS,
        "submissions_per_client": SUBMISSIONS,
        "requests": len(answers),
        "unique_keys": len(unique_keys),
        "answers_by_status": {str(k): v for k, v in sorted(codes.items())},
        "jobs_created": jobs.count(),
        "keys_lost": sorted(unique_keys - set(job_ids_by_key))[:10],
        "keys_duplicated": sum(1 for ids in job_ids_by_key.values() if len(ids) > 1),
        "keys_answered_with_two_ids": sum(1 for ids in ids_by_key.values() if len(ids) > 1),
        "latency_ms": {
            "p50": round(percentile(latencies, 50) * 1000, 1),
            "p95": round(percentile(latencies, 95) * 1000, 1),
            "max": round(latencies[-1] * 1000, 1),
        },
        "throughput_per_s": round(len(answers) / wall, 1),
        "wall_seconds": round(wall, 1),
        "rounds": rounds.count(),
        "rounds_failed": rounds.filter(state=Round.State.FAILED).count(),
        "database": stack.database_label,
        "broker": broker.label,
    }
    print(json.dumps(figures, indent=2))
    results_file = os.environ.get("KOORDWEB_RELIABILITY_RESULTS")
    if results_file:
        Path(results_file).write_text(json.dumps(figures, indent=2) + "\n")

    assert figures["requests"] == CLIENTS * SUBMISSIONS
    assert not [code for code in codes if code >= 500], (codes, stack.logs_tail())
    assert set(codes) <= {200, 201}, codes
    assert codes.get(201, 0) == len(unique_keys)
    assert figures["jobs_created"] == len(unique_keys)
    assert figures["keys_lost"] == []
    assert figures["keys_duplicated"] == 0
    assert figures["keys_answered_with_two_ids"] == 0
    assert all(ids == set(job_ids_by_key[key]) for key, ids in ids_by_key.items())
    assert figures["rounds"] >= 2, stack.logs_tail()
    assert figures["rounds_failed"] == 0, list(
        rounds.filter(state=Round.State.FAILED).values_list("error", flat=True)[:3]
    )
