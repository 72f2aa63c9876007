"""The nodes page (Headlamp's node list): per node its health, cordon, taints, allocation beside
reported usage against the load-aware thresholds, its cards and pods; filtered by domain, state
and device kind, paged on the server (`selectors.nodes.node_rows`). Admins cordon and uncordon a
node from its row (`services.cordon`, through the cluster)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from koordweb.figures.capacity import usage_bars
from koordweb.models import Cluster
from koordweb.presenters.quantities import quantity_text, resource_name
from koordweb.selectors.nodes import (
    DEVICE_KINDS,
    NODE_STATES,
    load_thresholds,
    node_rows,
    usage_summary,
)
from koordweb.services.cordon import CordonError, node_cordon, node_uncordon
from koordweb.views.common import (
    admin_required,
    current_cluster,
    int_param,
    is_admin,
    visible_jobs,
)

NODES_PER_PAGE = 50


@login_required
def node_list(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "nodes.html", {"cluster": None})
    domain = request.GET.get("domain", "").strip()[:63]
    state = request.GET.get("state", "")
    state = state if state in NODE_STATES else ""
    device = request.GET.get("device", "")
    device = device if device in DEVICE_KINDS else ""
    page = int_param(request, "page", 1, 1, 10_000)
    count, rows = node_rows(
        cluster,
        domain=domain,
        state=state,
        device=device,
        offset=(page - 1) * NODES_PER_PAGE,
        limit=NODES_PER_PAGE,
    )
    mine = (
        None
        if is_admin(request.user)
        else set(visible_jobs(request.user, cluster).values_list("pk", flat=True))
    )
    thresholds = load_thresholds(cluster)
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "cluster": cluster,
        "rows": [_row(row, mine, thresholds) for row in rows],
        "count": count,
        "page": page,
        "pages": max(1, -(-count // NODES_PER_PAGE)),
        "query": query.urlencode(),
        "domain": domain,
        "state": state,
        "device": device,
        "states": NODE_STATES,
        "devices": DEVICE_KINDS,
        "usage": usage_context(cluster),
        "admin": mine is None,
    }
    return render(request, "nodes.html", context)


# The nodes page's own filters: the only part of a posted query the answer goes back to.
KEPT_QUERY = ("domain", "state", "device", "page")


@admin_required
@require_POST
def node_cordon_page(request: HttpRequest, name: str) -> HttpResponse:
    """Cordon or uncordon one node (the row's button), then back to the page as it was."""
    cluster = current_cluster(request)
    if cluster is None:
        raise Http404("no cluster")
    action = request.POST.get("action")
    if action not in ("cordon", "uncordon"):
        return HttpResponse("action must be cordon or uncordon", status=400)
    act = node_cordon if action == "cordon" else node_uncordon
    try:
        result = act(cluster=cluster, name=name, user=request.user)
    except CordonError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, result.message)
    posted = QueryDict(request.POST.get("query", ""))
    kept = QueryDict(mutable=True)
    for key in KEPT_QUERY:
        if posted.get(key):
            kept[key] = posted[key][:63]
    return redirect(f"{reverse('nodes')}?{kept.urlencode()}" if kept else reverse("nodes"))


def _row(row: dict[str, Any], mine: set[int] | None, thresholds: dict[str, int]) -> dict[str, Any]:
    node = row["node"]
    usage = row["usage"]
    allocatable = node.allocatable or {}
    pods = [name for name, job_id in row["pods"] if mine is None or job_id in mine]
    return {
        "name": node.name,
        "health": "ready" if node.ready else "not ready",
        "cordoned": node.unschedulable,
        "taints": [
            f"{t.get('key', '')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect', '')}"
            for t in node.taints or []
            if isinstance(t, dict)
        ],
        "resources": [
            {
                "name": resource_name(resource),
                "allocated": quantity_text(resource, row["allocated"].get(resource, 0)),
                "allocatable": quantity_text(resource, allocatable.get(resource, 0)),
                "used_pct": usage.percent.get(resource) if usage else None,
                "threshold": thresholds.get(resource),
                "busy": resource in row["busy"],
            }
            for resource in ("cpu", "memory")
        ],
        "busy": [resource_name(r) for r in row["busy"]],
        "device": DEVICE_KINDS[row["device"]],
        "cards": len(row["cards"]),
        "unhealthy_cards": [minor for minor, healthy in row["cards"] if not healthy],
        "pods": pods[:8],
        "more_pods": len(row["pods"]) - len(pods[:8]),
        "reported_at": usage.reported_at if usage else None,
        "record": row["record"],
    }


def usage_context(cluster: Cluster) -> dict[str, Any]:
    """Reported node usage beside allocation, with the engine's load-aware thresholds and how
    many nodes are above each (the overview, topology and devices pages show it)."""
    summary = usage_summary(cluster)
    lines = []
    for resource in ("cpu", "memory"):
        threshold = summary.thresholds.get(resource)
        lines.append(
            {
                "resource": resource,
                "name": resource_name(resource),
                "used_pct": summary.percent(resource),
                "threshold": threshold,
                "above": summary.above.get(resource, 0),
            }
        )
    return {
        "lines": lines,
        "reported_nodes": summary.reported_nodes,
        "nodes": summary.nodes,
        "load_aware": bool(summary.thresholds),
        "figure": usage_bars(
            [
                (resource_name(r), summary.percent(r), summary.thresholds.get(r))
                for r in ("cpu", "memory")
            ]
        )
        if summary.reported_nodes
        else None,
    }
