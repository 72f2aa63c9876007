"""Observability: the Prometheus endpoint, API error counting, JSON logs carrying the round id.

- `/metrics` (`metrics_view`): round latency, rounds by state, pods bound and preemptions by
  state are read from the Round and Preemption rows at scrape time, so every process that runs
  rounds (any number of celery workers) is counted without a push gateway; API errors by status
  code are counted in the shared Django cache by `ApiErrorCountingMiddleware` (and by
  `api_error_count` for calls to the Kubernetes API server), so gunicorn and celery workers add up.
  Anonymous scrapes are allowed only from loopback; otherwise a `KOORDWEB_METRICS_TOKEN` bearer.
- Logs: `round_context` / `round_id_set` put the cluster and round id in a contextvar,
  `RoundContextFilter` copies them onto every record and `JsonFormatter` writes one JSON object
  per line, so every log line of a round can be found by its id.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from koordweb.models import Preemption, Round

# --- round context for logs ----------------------------------------------------------------

_round_id: ContextVar[int | None] = ContextVar("koordweb_round_id", default=None)
_cluster: ContextVar[str | None] = ContextVar("koordweb_cluster", default=None)


@contextlib.contextmanager
def round_context(*, cluster: str | None = None, round_id: int | None = None) -> Iterator[None]:
    """Every log line written inside carries this cluster and round id (restored on exit)."""
    cluster_token = _cluster.set(cluster)
    round_token = _round_id.set(round_id)
    try:
        yield
    finally:
        _round_id.reset(round_token)
        _cluster.reset(cluster_token)


def round_id_set(round_id: int | None) -> None:
    """Name the round once its row exists (inside `round_context`, which restores the old id)."""
    _round_id.set(round_id)


def round_id_current() -> int | None:
    return _round_id.get()


class RoundContextFilter(logging.Filter):
    """Copies the current round id and cluster onto each record (None outside a round)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.round_id = _round_id.get()
        record.cluster = _cluster.get()
        return True


# Attributes every LogRecord has; anything else on a record came from `extra=` and is kept.
_STANDARD_ATTRS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, round id, cluster, extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            # Read the contextvar too, so the formatter works without the filter installed.
            "round_id": getattr(record, "round_id", None) or _round_id.get(),
            "cluster": getattr(record, "cluster", None) or _cluster.get(),
            "process": record.process,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


# --- API errors counted in the shared cache ------------------------------------------------

API_ERROR_SOURCES = ("http", "kube")
# Every code a counter may exist for: 4xx and 5xx from the standard list, 0 = no answer at all.
API_ERROR_CODES = (0, *sorted(s.value for s in HTTPStatus if s.value >= 400))
_ERROR_KEY = "metrics:api-errors:{source}:{code}"


def api_error_count(source: str, code: int) -> None:
    """Add one error answer (or, with code 0, a dropped connection) to the shared counters."""
    if source not in API_ERROR_SOURCES:
        raise ValueError(f"unknown API error source {source!r}")
    if code not in API_ERROR_CODES:
        code = 500 if code >= 500 else 400 if code >= 400 else 0
    key = _ERROR_KEY.format(source=source, code=code)
    # add() makes the key exist forever; incr() is atomic on Redis (the production cache).
    cache.add(key, 0, timeout=None)
    try:
        cache.incr(key)
    except ValueError:  # evicted between add and incr
        cache.set(key, 1, timeout=None)


def api_error_counts() -> dict[tuple[str, int], int]:
    """{(source, code): count} for every counter that exists."""
    keys = {
        _ERROR_KEY.format(source=source, code=code): (source, code)
        for source in API_ERROR_SOURCES
        for code in API_ERROR_CODES
    }
    found = cache.get_many(list(keys))
    return {keys[key]: int(value) for key, value in found.items()}


class ApiErrorCountingMiddleware:
    """Counts every 4xx/5xx answer under the API prefix by status code (unhandled errors: 500)."""

    prefix = "/api/"

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        counted = request.path.startswith(self.prefix)
        try:
            response = self.get_response(request)
        except Exception:
            if counted:
                api_error_count("http", 500)
            raise
        if counted and response.status_code >= 400:
            api_error_count("http", response.status_code)
        return response


# --- the metrics, read from the database at scrape time ------------------------------------

# Round latency buckets in seconds: rounds are tens of milliseconds to tens of seconds.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class RoundCollector(Collector):
    """Prometheus families computed from the Round and Preemption rows (all processes' rounds)."""

    def collect(self) -> Iterator[Metric]:
        yield self._latency()
        rounds = CounterMetricFamily(
            "koordweb_rounds", "Scheduling rounds by final state", labels=["cluster", "state"]
        )
        bound = CounterMetricFamily(
            "koordweb_pods_bound", "Pods bound by scheduling rounds", labels=["cluster"]
        )
        last = GaugeMetricFamily(
            "koordweb_last_round_timestamp_seconds",
            "Start of the latest round of each cluster",
            labels=["cluster"],
        )
        per_cluster = (
            Round.objects.values("cluster__name", "state")
            .annotate(n=Count("id"), pods=Sum("pods_bound"))
            .order_by("cluster__name", "state")
        )
        pods_by_cluster: dict[str, int] = {}
        for row in per_cluster:
            name = row["cluster__name"]
            rounds.add_metric([name, row["state"]], row["n"])
            pods_by_cluster[name] = pods_by_cluster.get(name, 0) + int(row["pods"] or 0)
        for name, pods in sorted(pods_by_cluster.items()):
            bound.add_metric([name], pods)
        for row in Round.objects.values("cluster__name").annotate(at=Max("started_at")).order_by():
            if row["at"] is not None:
                last.add_metric([row["cluster__name"]], row["at"].timestamp())
        yield rounds
        yield bound
        yield last
        preemptions = GaugeMetricFamily(
            "koordweb_preemptions", "Preemptions by state", labels=["cluster", "state"]
        )
        for row in (
            Preemption.objects.values("cluster__name", "state")
            .annotate(n=Count("id"))
            .order_by("cluster__name", "state")
        ):
            preemptions.add_metric([row["cluster__name"], row["state"]], row["n"])
        yield preemptions
        errors = CounterMetricFamily(
            "koordweb_api_errors",
            "Error answers by source (http: koordweb's API, kube: the API server) and status "
            "code; code 0 is a dropped connection",
            labels=["source", "code"],
        )
        for (source, code), count in sorted(api_error_counts().items()):
            errors.add_metric([source, str(code)], count)
        yield errors

    def _latency(self) -> HistogramMetricFamily:
        """A cumulative histogram over every finished round: counts only grow, as Prometheus wants."""
        family = HistogramMetricFamily(
            "koordweb_round_duration_seconds",
            "Wall time of successful scheduling rounds (sync, engine, record, enact)",
            labels=["cluster"],
        )
        done = Round.objects.filter(state=Round.State.SUCCEEDED, duration_ms__isnull=False)
        aggregates: dict[str, Any] = {
            f"le_{i}": Count("id", filter=Q(duration_ms__lte=int(bound * 1000)))
            for i, bound in enumerate(LATENCY_BUCKETS)
        }
        rows = (
            done.values("cluster__name")
            .annotate(total=Count("id"), sum_ms=Sum("duration_ms"), **aggregates)
            .order_by("cluster__name")
        )
        for row in rows:
            buckets: list[tuple[str, float]] = [
                (str(bound), row[f"le_{i}"]) for i, bound in enumerate(LATENCY_BUCKETS)
            ]
            buckets.append(("+Inf", row["total"]))
            family.add_metric(
                [row["cluster__name"]], buckets, sum_value=(row["sum_ms"] or 0) / 1000.0
            )
        return family


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(RoundCollector())


# --- the endpoint --------------------------------------------------------------------------

_PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP", "HTTP_FORWARDED")


def _from_loopback(request: HttpRequest) -> bool:
    # Behind a reverse proxy every request comes from loopback: a forwarded one is not local.
    if any(request.META.get(header) for header in _PROXY_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def _bearer_ok(request: HttpRequest) -> bool:
    expected = os.environ.get("KOORDWEB_METRICS_TOKEN", "")
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if not expected or scheme.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


def metrics_allowed(request: HttpRequest) -> bool:
    """Loopback without a proxy in between, or the KOORDWEB_METRICS_TOKEN bearer."""
    return _bearer_ok(request) or _from_loopback(request)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text exposition of koordweb's metrics."""
    if not metrics_allowed(request):
        response = HttpResponse("metrics need a bearer token\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="koordweb-metrics"'
        response["Content-Type"] = "text/plain; charset=utf-8"
        return response
    response = HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
