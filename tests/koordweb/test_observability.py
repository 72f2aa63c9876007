"""The /metrics endpoint (contents, protection), API error counting, JSON logs with the round id."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from django.urls import path
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from koordweb.models import Preemption, Round
from koordweb.observability import (
    JsonFormatter,
    RoundContextFilter,
    round_context,
    round_id_current,
    round_id_set,
)
from koordweb.observability.counters import api_error_count, api_error_counts
from koordweb.prometheus.metrics import ApiErrorCountingMiddleware, metrics_view
from tests import builders as f

# This module is its own URLconf (the project's urls.py gains /metrics from the lead).
urlpatterns = [path("metrics", metrics_view)]
pytestmark = pytest.mark.urls(__name__)
TOKEN = "s3cret-metrics-token"


@pytest.fixture(autouse=True)
def private_cache(settings):
    """A cache of this test's own: other tests (and processes) count errors in the shared one."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"observability-{threading.get_ident()}-{timezone.now().timestamp()}",
        }
    }


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def scrape(client, **headers) -> str:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return response.content.decode()


@pytest.fixture
def history(db):
    """Two clusters' rounds: known durations, states, pods bound, and preemptions by state."""
    now = timezone.now()
    a = f.ClusterFactory(name="alpha")
    b = f.ClusterFactory(name="beta")

    def rnd(cluster, ms, state=Round.State.SUCCEEDED, pods=0, ago=0):
        return f.RoundFactory(
            cluster=cluster,
            state=state,
            started_at=now - timedelta(seconds=ago),
            finished_at=now,
            duration_ms=ms if state == Round.State.SUCCEEDED else None,
            pods_bound=pods,
        )

    first = rnd(a, 20, pods=3, ago=30)
    rnd(a, 300, pods=2, ago=20)
    rnd(a, 4000, ago=10)
    rnd(a, 0, state=Round.State.FAILED, ago=5)
    rnd(b, 70, pods=1)
    job = f.JobFactory(cluster=a, name="urgent", namespace="ml", submitted_at=now, quota=None)
    for state in (Preemption.State.ENACTED, Preemption.State.ENACTED, Preemption.State.BLOCKED):
        f.PreemptionFactory(round=first, preemptor=job, state=state, cost={}, created_at=now)
    return a, b, now


def test_metrics_expose_latency_states_pods_and_preemptions(client, history):
    _, _, now = history
    found = samples(scrape(client, REMOTE_ADDR="127.0.0.1"))
    alpha = (("cluster", "alpha"),)

    def bucket(le: str) -> float:
        return found[("koordweb_round_duration_seconds_bucket", (*alpha, ("le", le)))]

    # 20 ms, 300 ms, 4 s: cumulative buckets, failed rounds excluded.
    assert bucket("0.01") == 0 and bucket("0.025") == 1 and bucket("0.25") == 1
    assert bucket("0.5") == 2 and bucket("2.5") == 2 and bucket("5.0") == 3 and bucket("+Inf") == 3
    assert found[("koordweb_round_duration_seconds_count", alpha)] == 3
    assert found[("koordweb_round_duration_seconds_sum", alpha)] == pytest.approx(4.32)
    assert found[("koordweb_rounds_total", (*alpha, ("state", "succeeded")))] == 3
    assert found[("koordweb_rounds_total", (*alpha, ("state", "failed")))] == 1
    assert found[("koordweb_rounds_total", (("cluster", "beta"), ("state", "succeeded")))] == 1
    assert found[("koordweb_pods_bound_total", alpha)] == 5
    assert found[("koordweb_pods_bound_total", (("cluster", "beta"),))] == 1
    assert found[("koordweb_preemptions", (*alpha, ("state", "enacted")))] == 2
    assert found[("koordweb_preemptions", (*alpha, ("state", "blocked")))] == 1
    last = found[("koordweb_last_round_timestamp_seconds", alpha)]
    assert last == pytest.approx((now - timedelta(seconds=5)).timestamp(), abs=0.001)


def test_metrics_on_an_empty_database_are_valid_and_empty(client, db):
    found = samples(scrape(client, REMOTE_ADDR="::1"))
    assert not any(name.startswith("koordweb_rounds") for name, _ in found)


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"REMOTE_ADDR": "127.0.0.1"}, True),
        ({"REMOTE_ADDR": "::1"}, True),
        ({"REMOTE_ADDR": "10.1.2.3"}, False),
        # A reverse proxy on the same host: the request itself is not local.
        ({"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.9"}, False),
        ({"REMOTE_ADDR": "10.1.2.3", "HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}, True),
        ({"REMOTE_ADDR": "10.1.2.3", "HTTP_AUTHORIZATION": "Bearer wrong"}, False),
        ({"REMOTE_ADDR": "10.1.2.3", "HTTP_AUTHORIZATION": f"Basic {TOKEN}"}, False),
    ],
)
def test_metrics_need_loopback_or_the_bearer_token(client, db, settings, headers, allowed):
    settings.KOORDWEB_METRICS_TOKEN = TOKEN
    response = client.get("/metrics", **headers)
    assert response.status_code == (200 if allowed else 401)
    if not allowed:
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert b"koordweb_" not in response.content


def test_without_a_configured_token_no_bearer_is_accepted(client, db, monkeypatch):
    monkeypatch.delenv("KOORDWEB_METRICS_TOKEN", raising=False)
    response = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer ")
    assert response.status_code == 401


def test_metrics_refuse_writes(client, db):
    assert client.post("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 405


def test_api_errors_are_counted_by_code_and_exposed(client, db, rf):
    def answer(status: int):
        from django.http import HttpResponse

        return lambda request: HttpResponse(status=status)

    for status, where in [(404, "/api/jobs/9"), (404, "/api/x"), (429, "/api/jobs"), (200, "/api")]:
        ApiErrorCountingMiddleware(answer(status))(rf.get(where))
    ApiErrorCountingMiddleware(answer(500))(rf.get("/ui/page"))  # not the API: not counted

    def boom(request):
        raise RuntimeError("unhandled")

    with pytest.raises(RuntimeError):
        ApiErrorCountingMiddleware(boom)(rf.get("/api/crash"))
    api_error_count("kube", 503)
    api_error_count("kube", 0)
    api_error_count("kube", 599)  # not a standard code: counted as 500
    assert api_error_counts() == {
        ("http", 404): 2,
        ("http", 429): 1,
        ("http", 500): 1,
        ("kube", 503): 1,
        ("kube", 0): 1,
        ("kube", 500): 1,
    }
    found = samples(scrape(client, REMOTE_ADDR="127.0.0.1"))
    assert found[("koordweb_api_errors_total", (("code", "404"), ("source", "http")))] == 2
    assert found[("koordweb_api_errors_total", (("code", "0"), ("source", "kube")))] == 1
    with pytest.raises(ValueError):
        api_error_count("smtp", 500)


def test_the_middleware_counts_real_api_answers(client, db, settings):
    settings.ROOT_URLCONF = "koordweb.urls"
    assert "koordweb.prometheus.metrics.ApiErrorCountingMiddleware" in settings.MIDDLEWARE
    for _ in range(3):
        client.get("/api/no-such-endpoint/")
    client.get("/api/v1/jobs/")  # anonymous: refused
    counts = api_error_counts()
    assert counts[("http", 404)] == 3
    assert sum(v for (source, code), v in counts.items() if code in (401, 403)) == 1


def _json_logger(name: str) -> tuple[logging.Logger, list[str]]:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RoundContextFilter())
    logger = logging.getLogger(name)
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, lines


def test_every_log_line_of_a_round_carries_its_id():
    logger, lines = _json_logger("koordweb.test.rounds")
    logger.info("before any round")
    with round_context(cluster="alpha"):
        logger.info("syncing")
        round_id_set(41)
        logger.info("bound %d pods", 3, extra={"pods": 3})
        with round_context(cluster="beta", round_id=7):
            logger.warning("nested")
        assert round_id_current() == 41
        try:
            raise KeyError("lost")
        except KeyError:
            logger.exception("enact failed")
    logger.info("after")
    entries = [json.loads(line) for line in lines]
    assert [(e["message"], e["cluster"], e["round_id"]) for e in entries] == [
        ("before any round", None, None),
        ("syncing", "alpha", None),
        ("bound 3 pods", "alpha", 41),
        ("nested", "beta", 7),
        ("enact failed", "alpha", 41),
        ("after", None, None),
    ]
    assert entries[2]["pods"] == 3 and entries[2]["level"] == "INFO"
    assert "KeyError: 'lost'" in entries[4]["exception"]
    assert entries[0]["time"].endswith("+00:00")


def test_round_ids_do_not_leak_between_threads():
    logger, lines = _json_logger("koordweb.test.threads")
    ready = threading.Barrier(2)

    def worker(round_id: int) -> None:
        with round_context(cluster="c", round_id=round_id):
            ready.wait()
            logger.info("in round")

    threads = [threading.Thread(target=worker, args=(i,)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(json.loads(line)["round_id"] for line in lines) == [1, 2]


# The LOGGING entries proposed for settings.py (see docs/reliability.md "Observability").
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"round": {"()": "koordweb.observability.RoundContextFilter"}},
    "formatters": {"json": {"()": "koordweb.observability.JsonFormatter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json", "filters": ["round"]}
    },
    "root": {"handlers": ["console"], "level": "INFO"},
}


def test_the_logging_config_loads_before_the_app_registry_and_writes_json(tmp_path):
    """Django configures logging before it populates the apps: the package must import bare."""
    script = tmp_path / "configure.py"
    script.write_text(
        "import json, logging, logging.config, sys\n"
        "from django.apps import apps\n"
        "assert not apps.ready\n"
        f"logging.config.dictConfig({LOGGING!r})\n"
        "from koordweb.observability import round_context\n"
        "with round_context(cluster='c1', round_id=5):\n"
        "    logging.getLogger('koordweb.rounds').info('placed %d', 2)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stderr.strip().splitlines()[-1])
    assert entry["message"] == "placed 2" and entry["round_id"] == 5 and entry["cluster"] == "c1"
