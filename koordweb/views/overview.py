"""The overview page, an admin's first look, and its live partial (htmx polls it).

Capacity in absolute figures (CPU, memory, pods, whole cards), accelerators per model
(allocated / healthy / total), unhealthy cards, the queue's demand per team, the rounds' health
and the queue's trend over the last rounds. Every figure is of the cluster in the session.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from koordweb.figures.capacity import accelerator_bars, capacity_bars, queue_trend
from koordweb.models import JobState
from koordweb.presenters.quantities import shape_text
from koordweb.selectors.card_tallies import device_counts, device_type_usage
from koordweb.selectors.overview import (
    capacity_usage,
    cluster_alerts,
    job_state_counts,
    queue_demand,
    recent_rounds,
    rounds_health,
)
from koordweb.selectors.topology import nodes_outside_topology
from koordweb.views.common import current_cluster, is_admin, visible_jobs
from koordweb.views.gpu import gpu_health_context

ALERT_WINDOW = timedelta(hours=24)
LIVE_SECONDS = 10


def _live_context(request: HttpRequest) -> dict[str, Any]:
    cluster = current_cluster(request)
    if cluster is None:
        return {"cluster": None}
    usage = [(u.resource, u.capacity, u.allocated) for u in capacity_usage(cluster)]
    accelerators = device_type_usage(cluster)
    cards, unhealthy, _ = device_counts(cluster)
    jobs = visible_jobs(request.user, cluster)
    counts = job_state_counts(jobs)
    health = rounds_health(cluster)
    since = timezone.now() - ALERT_WINDOW
    outside = nodes_outside_topology(cluster)
    return {
        "cluster": cluster,
        "resource_figure": capacity_bars(usage),
        "accelerators": accelerators,
        "device_figure": accelerator_bars(
            [(a.model, a.total, a.healthy, a.allocated) for a in accelerators]
        )
        if accelerators
        else None,
        "cards": cards,
        "unhealthy": unhealthy,
        "counts": {
            "pending": sum(counts.get(s, 0) for s in JobState.WAITING),
            "running": counts.get(JobState.RUNNING, 0) + counts.get(JobState.SCHEDULED, 0),
            "preempted": counts.get(JobState.PREEMPTED, 0) + counts.get(JobState.PREEMPTING, 0),
            "finished": counts.get(JobState.SUCCEEDED, 0) + counts.get(JobState.FAILED, 0),
        },
        "demand": [
            (team, shape_text(team.requests))
            for team in queue_demand(jobs.filter(state__in=JobState.WAITING))
        ],
        "health": health,
        "trend_figure": queue_trend(health.trend) if len(health.trend) > 1 else None,
        "rounds": recent_rounds(cluster, limit=8),
        "alerts": cluster_alerts(cluster, outside=outside, since=since)
        if is_admin(request.user)
        else [],
        "refreshed_at": timezone.now(),
        "live_seconds": LIVE_SECONDS,
        **gpu_health_context(cluster, visible_jobs(request.user, cluster)),
    }


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "overview.html", _live_context(request))


@login_required
def overview_live(request: HttpRequest) -> HttpResponse:
    return render(request, "includes/overview_live.html", _live_context(request))
