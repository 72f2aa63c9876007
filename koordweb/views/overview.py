"""The overview page and its live partial (htmx polls it every few seconds)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from koordweb.figures.capacity import capacity_bars
from koordweb.models import JobState
from koordweb.selectors.devices import device_type_usage
from koordweb.selectors.overview import (
    cluster_alerts,
    job_state_counts,
    recent_rounds,
    resource_usage,
)
from koordweb.selectors.topology import nodes_outside_topology
from koordweb.views.common import current_cluster, is_admin, visible_jobs
from koordweb.views.gpu import gpu_health_context

# Resources people look at first; the rest follow by name.
LEADING_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "koordinator.sh/gpu-core")
ALERT_WINDOW = timedelta(hours=24)


def _live_context(request: HttpRequest) -> dict[str, Any]:
    cluster = current_cluster(request)
    if cluster is None:
        return {"cluster": None}
    usage = [(u.resource, u.capacity, u.allocated) for u in resource_usage(cluster)]
    usage.sort(key=lambda row: (row[0] not in LEADING_RESOURCES, row[0]))
    devices = device_type_usage(cluster)
    counts = job_state_counts(visible_jobs(request.user, cluster))
    since = timezone.now() - ALERT_WINDOW
    outside = nodes_outside_topology(cluster)
    return {
        "cluster": cluster,
        "resource_figure": capacity_bars(usage),
        "device_figure": capacity_bars(devices) if devices else None,
        "counts": {
            "pending": counts.get(JobState.PENDING, 0),
            "running": counts.get(JobState.RUNNING, 0) + counts.get(JobState.SCHEDULED, 0),
            "preempted": counts.get(JobState.PREEMPTED, 0),
            "finished": counts.get(JobState.SUCCEEDED, 0) + counts.get(JobState.FAILED, 0),
        },
        "rounds": recent_rounds(cluster, limit=8),
        "alerts": cluster_alerts(cluster, outside=outside, since=since)
        if is_admin(request.user)
        else [],
        "refreshed_at": timezone.now(),
        **gpu_health_context(cluster, visible_jobs(request.user, cluster)),
    }


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "overview.html", _live_context(request))


@login_required
def overview_live(request: HttpRequest) -> HttpResponse:
    return render(request, "includes/overview_live.html", _live_context(request))
