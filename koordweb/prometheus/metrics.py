"""Prometheus metrics: the `/metrics` view, API error counters and the collector behind them.

Round latency, rounds by state, pods bound and preemptions by state are read from the Round and
Preemption rows at scrape time, so every process that runs rounds (any number of celery workers)
is counted without a push gateway. API errors by status code are counted in the shared Django
cache by `ApiErrorCountingMiddleware` (and by `api_error_count` for answers of the Kubernetes API
server), so gunicorn and celery workers add up. Anonymous scrapes are allowed only from loopback
with no proxy in between; otherwise the `KOORDWEB_METRICS_TOKEN` bearer is needed.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
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
from koordweb.observability.counters import api_error_count, api_error_counts
from koordweb.prometheus.gpu_metrics import GpuCollector

# --- API errors: the middleware ------------------------------------------------------------


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
        latest = Round.objects.values("cluster__name").annotate(at=Max("started_at")).order_by()
        for newest in latest:
            if newest["at"] is not None:
                last.add_metric([newest["cluster__name"]], newest["at"].timestamp())
        yield rounds
        yield bound
        yield last
        preemptions = GaugeMetricFamily(
            "koordweb_preemptions", "Preemptions by state", labels=["cluster", "state"]
        )
        for counted in (
            Preemption.objects.values("cluster__name", "state")
            .annotate(n=Count("id"))
            .order_by("cluster__name", "state")
        ):
            preemptions.add_metric([counted["cluster__name"], counted["state"]], counted["n"])
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
        """A cumulative histogram over all finished rounds: counts only grow."""
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
            # The bucket counts are dynamic annotations the stubs' TypedDict does not know.
            counts: dict[str, Any] = dict(row)
            buckets: list[tuple[str, float]] = [
                (str(bound), counts[f"le_{i}"]) for i, bound in enumerate(LATENCY_BUCKETS)
            ]
            buckets.append(("+Inf", row["total"]))
            family.add_metric(
                [row["cluster__name"]], buckets, sum_value=(row["sum_ms"] or 0) / 1000.0
            )
        return family


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(RoundCollector())
REGISTRY.register(GpuCollector())


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
    expected = settings.KOORDWEB_METRICS_TOKEN
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
