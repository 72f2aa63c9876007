"""Service restarts (issue #9 item 4): PostgreSQL, then Redis, stopped and started under load.

The scenario runs a private PostgreSQL (initdb + pg_ctl in a temp dir, as the `postgres` user
when we are root, on a free 127.0.0.1 port) and a private redis-server (broker and cache), with
gunicorn (2 workers) and a `celery worker -B` (timed rounds every second) pointed at them. Client
threads submit jobs with Idempotency-Keys and retry a key until it is answered 200/201, as a
client honouring Retry-After would. PostgreSQL is stopped (`pg_ctl stop -m fast`) for a few
seconds and started again; then Redis. Checked: no answer is a 500 (or any 5xx but 503), every
503 carries Retry-After, every job answered 200/201 exists in the database afterwards and no key
has two jobs, and a successful round starts within 10 s of each service coming back.

In-process tests of `koordweb.outage` come first: they need no services.

`KOORDWEB_RESTART_CLIENTS`, `KOORDWEB_RESTART_OUTAGE_SECONDS` and `KOORDWEB_RESTART_CYCLES` size
the scenario (CI: 4 clients, 4 s, 1 cycle; benchmarks/reliability_restart.py: 8, 10 s, 3);
`KOORDWEB_RELIABILITY_RESULTS` names a JSON file for the figures.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from glob import glob
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path
from kombu.exceptions import OperationalError as BrokerOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from koordweb.outage import is_outage, round_enqueue_guarded
from tests.reliability.stack import (
    ROOT,
    AppStack,
    Submission,
    Submitter,
    free_port,
    private_broker,
)

CLIENTS = int(os.environ.get("KOORDWEB_RESTART_CLIENTS", "4"))
OUTAGE_SECONDS = float(os.environ.get("KOORDWEB_RESTART_OUTAGE_SECONDS", "4"))
CYCLES = int(os.environ.get("KOORDWEB_RESTART_CYCLES", "1"))
RESUME_LIMIT = 10.0  # seconds from a service's return to the next successful round
OUTAGE = "koordweb.outage.OutageMiddleware"

# --- koordweb.outage in-process: views and a middleware that lose their services ------------


def view_db_gone(request: HttpRequest) -> HttpResponse:
    raise OperationalError('connection to server at "127.0.0.1", port 5432 failed')


def view_bug(request: HttpRequest) -> HttpResponse:
    raise ValueError("a bug, not an outage")


def view_ok(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


class CacheGoneMiddleware:
    """Stands for a middleware that reads the cache (sessions, throttles) while Redis is away."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.endswith("/cache-gone/"):
            raise RedisConnectionError(
                "Error 111 connecting to 127.0.0.1:6379. Connection refused."
            )
        return self.get_response(request)


urlpatterns = [
    path("api/v1/db-gone/", view_db_gone),
    path("db-gone/", view_db_gone),
    path("api/v1/cache-gone/", view_ok),
    path("bug/", view_bug),
    path("ok/", view_ok),
]


@pytest.fixture
def outage_site(settings: Any) -> Client:
    settings.ROOT_URLCONF = __name__
    settings.MIDDLEWARE = [
        "django.middleware.security.SecurityMiddleware",
        OUTAGE,
        f"{__name__}.CacheGoneMiddleware",
        "django.middleware.common.CommonMiddleware",
    ]
    settings.KOORDWEB_OUTAGE_RETRY_AFTER = 7
    return Client(raise_request_exception=False)


def test_lost_database_in_an_api_view_is_503_json(outage_site: Client) -> None:
    response = outage_site.get("/api/v1/db-gone/")
    assert response.status_code == 503
    assert response["Retry-After"] == "7"
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "service_unavailable"
    assert "database" in response.json()["detail"]


def test_lost_database_on_a_page_is_503_html(outage_site: Client) -> None:
    response = outage_site.get("/db-gone/")
    assert response.status_code == 503
    assert response["Retry-After"] == "7"
    assert response["Content-Type"].startswith("text/html")
    assert b"Temporarily unavailable" in response.content
    assert response["X-Content-Type-Options"] == "nosniff"  # SecurityMiddleware still applies


def test_lost_cache_inside_another_middleware_is_503(outage_site: Client) -> None:
    response = outage_site.get("/api/v1/cache-gone/")
    assert response.status_code == 503
    assert "cache or message broker" in response.json()["detail"]


def test_bugs_keep_their_500_and_healthy_requests_pass(outage_site: Client) -> None:
    assert outage_site.get("/bug/").status_code == 500
    assert outage_site.get("/ok/").status_code == 200


def test_outage_classification_follows_explicit_causes_only() -> None:
    try:
        try:
            raise RedisConnectionError("refused")
        except RedisConnectionError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert is_outage(wrapped)
    try:
        try:
            raise RedisConnectionError("refused")
        except RedisConnectionError:
            raise KeyError("a bug while handling it") from None
    except KeyError as bug:
        assert not is_outage(bug)
    assert is_outage(BrokerOperationalError("broker gone"))


def test_guarded_round_request_swallows_only_outages(caplog: pytest.LogCaptureFixture) -> None:
    def broker_gone() -> None:
        raise BrokerOperationalError("Error 111 connecting to 127.0.0.1:6379")

    def bug() -> None:
        raise TypeError("bug")

    with caplog.at_level(logging.WARNING, logger="koordweb.outage"):
        round_enqueue_guarded(broker_gone, cluster_id=3)()
    assert "cluster 3 not enqueued" in caplog.text
    with pytest.raises(TypeError):
        round_enqueue_guarded(bug, cluster_id=3)()


def api_handler_delegates_outages() -> bool:
    """Whether the API's exception handler answers a lost database with 503 (see the report)."""
    from rest_framework.test import APIRequestFactory

    from koordweb.api.exceptions import api_exception_handler

    request = APIRequestFactory().post("/api/v1/jobs/")
    logging.getLogger("koordweb.api").disabled = True
    try:
        response = api_exception_handler(OperationalError("gone"), {"request": request})
    finally:
        logging.getLogger("koordweb.api").disabled = False
    return response is not None and response.status_code == 503


def test_api_exception_handler_answers_outages_with_503() -> None:
    assert api_handler_delegates_outages()


# --- the scenario: private PostgreSQL and Redis restarted under load -------------------------


class PrivatePostgres:
    """initdb + pg_ctl in a temp dir on a free port; as `postgres` when we run as root."""

    def __init__(self) -> None:
        found = sorted(glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
        binary = found[0] if found else shutil.which("pg_ctl")
        if binary is None:
            pytest.skip("PostgreSQL server binaries (pg_ctl, initdb) are not installed")
        self.bin = Path(binary).parent
        self.dir = Path(tempfile.mkdtemp(prefix="koordweb-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root
            shutil.chown(self.dir, user="postgres", group="postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/koordweb"

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, timeout=120)

    def init(self) -> None:
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self.start()
        self._run(
            str(self.bin / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "koordweb",
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.dir / "log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop"
        )

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    try:
        server.init()
        yield server
    finally:
        server.destroy()


SEED = (
    "import json; from tests.builders import load_world; "
    "print('TOKENS=' + json.dumps(load_world(clients={clients}).tokens))"
)


def manage(stack: AppStack, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url.replace("postgres://", "postgresql://"), connect_timeout=10) as conn:
        return list(conn.execute(sql).fetchall())


class Load:
    """Client threads: each submits new keys one after another, retrying a key until 2xx."""

    def __init__(self, url: str, tokens: list[str]) -> None:
        self.submitters = [Submitter(url, token) for token in tokens]
        self.answers: list[Submission] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._client, args=(i,)) for i in range(len(tokens))
        ]

    def _client(self, index: int) -> None:
        number = 0
        while not self.stop.is_set():
            key, number = f"r{index}-{number}", number + 1
            deadline = time.monotonic() + 60  # a key is given up only if the app never recovers
            while time.monotonic() < deadline:
                answer = self.submitters[index].submit(key)
                answer.at = time.time()
                with self.lock:
                    self.answers.append(answer)
                if answer.status in (200, 201):
                    break
                time.sleep(0.25)
            time.sleep(0.05)

    def answered_after(self, moment: float, timeout: float) -> bool:
        """Wait until some client had a 2xx answer after `moment` (epoch); False if none came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if any(a.at > moment and a.status in (200, 201) for a in self.answers):
                    return True
            time.sleep(0.05)
        return False

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=90)


def first_round_after(url: str, moment: float) -> float | None:
    """Seconds from `moment` (epoch) to the start of the first successful round after it."""
    rows = query(
        url,
        "SELECT min(started_at) FROM koordweb_round WHERE state = 'succeeded' AND started_at > "
        f"to_timestamp({moment})",
    )
    started = rows[0][0]
    return None if started is None else started.timestamp() - moment


def wait_for_round(url: str, moment: float, limit: float) -> float | None:
    deadline = time.time() + limit + 5
    while time.time() < deadline:
        with contextlib.suppress(Exception):  # the database may still be coming up
            delay = first_round_after(url, moment)
            if delay is not None:
                return delay
        time.sleep(0.5)
    return None


def outage(name: str, stop: Any, start: Any, load: Load, db_url: str) -> dict[str, Any]:
    """Stop a service for OUTAGE_SECONDS under `load`, start it, wait for the next round."""
    down = time.time()
    stop()
    time.sleep(OUTAGE_SECONDS)
    up_begin = time.time()
    start()
    up = time.time()
    resume = wait_for_round(db_url, up, RESUME_LIMIT)
    load.answered_after(up, 60)  # a client is answered again (else the check below names it)
    with load.lock:
        window = [a for a in load.answers if down <= a.at <= up]
        after = [a for a in load.answers if a.at > up and a.status in (200, 201)]
    codes: dict[str, int] = {}
    for answer in window:
        codes[str(answer.status)] = codes.get(str(answer.status), 0) + 1
    return {
        "service": name,
        "down_seconds": round(up_begin - down, 1),
        "start_seconds": round(up - up_begin, 1),
        "answers_during_outage": codes,
        "first_2xx_after_recovery_s": round(min(a.at for a in after) - up, 2) if after else None,
        "round_resumed_after_s": None if resume is None else round(resume, 2),
    }


def test_postgres_and_redis_restart_under_load(tmp_path: Path) -> None:
    with (
        private_postgres() as pg,
        private_broker(tmp_path, redis=True) as broker,
        AppStack(tmp_path, broker, database=pg.url) as stack,
    ):
        manage(stack, "migrate", "--noinput")
        seeded = manage(stack, "shell", "-c", SEED.format(clients=CLIENTS))
        tokens = json.loads(seeded.split("TOKENS=", 1)[1].splitlines()[0])
        stack.start_web(workers=2)
        stack.start_worker(beat_seconds=1.0)
        assert wait_for_round(pg.url, time.time(), 30) is not None, stack.logs_tail()
        outages = []
        with Load(stack.url, tokens) as load:
            assert load.answered_after(0, 60), stack.logs_tail()  # the load is flowing
            for _ in range(CYCLES):
                outages.append(outage("postgresql", pg.stop, pg.start, load, pg.url))
                outages.append(outage("redis", broker.redis_stop, broker.redis_start, load, pg.url))
        alive = {name: p.poll() is None for name, p in stack.processes.items()}
        jobs = query(pg.url, "SELECT idempotency_key, id FROM koordweb_job")
        rounds = query(pg.url, "SELECT state, count(*) FROM koordweb_round GROUP BY state")
        logs = stack.logs_tail()
        stack.stop()

    answered = {(a.key, a.job_id) for a in load.answers if a.status in (200, 201)}
    job_ids = {job_id for _, job_id in jobs}
    keys_with_jobs: dict[str, int] = {}
    for key, _ in jobs:
        keys_with_jobs[key] = keys_with_jobs.get(key, 0) + 1
    codes: dict[str, int] = {}
    for answer in load.answers:
        codes[str(answer.status)] = codes.get(str(answer.status), 0) + 1
    figures: dict[str, Any] = {
        "clients": CLIENTS,
        "outage_seconds": OUTAGE_SECONDS,
        "cycles": CYCLES,
        "requests": len(load.answers),
        "answers_by_status": dict(sorted(codes.items())),
        "503_without_retry_after": sum(
            1 for a in load.answers if a.status == 503 and not a.retry_after
        ),
        "jobs_answered_2xx": len({key for key, _ in answered}),
        "jobs_answered_but_missing": sorted(
            key for key, job_id in answered if job_id not in job_ids
        )[:10],
        "keys_with_two_jobs": sum(1 for n in keys_with_jobs.values() if n > 1),
        "jobs_in_database": len(jobs),
        "rounds_by_state": {state: n for state, n in rounds},
        "outages": outages,
        "processes_alive_at_end": alive,
        "api_exception_handler_wired": api_handler_delegates_outages(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    print(json.dumps(figures, indent=2))
    if results := os.environ.get("KOORDWEB_RELIABILITY_RESULTS"):
        Path(results).write_text(json.dumps(figures, indent=2) + "\n")

    assert figures["jobs_answered_2xx"] > 0
    assert figures["jobs_answered_but_missing"] == [], figures
    assert figures["keys_with_two_jobs"] == 0
    assert all(alive.values()), logs
    for episode in outages:
        assert episode["round_resumed_after_s"] is not None, (episode, logs)
        assert episode["round_resumed_after_s"] <= RESUME_LIMIT, episode
        assert episode["first_2xx_after_recovery_s"] is not None, episode
    assert codes.get("0", 0) == 0, [a.body for a in load.answers if a.status == 0][:3]
    assert figures["503_without_retry_after"] == 0
    assert set(codes) <= {"200", "201", "503"}, (codes, logs)
    assert all(episode["answers_during_outage"].get("503") for episode in outages), outages
