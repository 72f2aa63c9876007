"""What the navigation bar shows on every page: the clusters to switch between and the current
one (a template context processor), and the switch itself (a POST that the session remembers)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from koordweb.selectors.catalog import cluster_by_name, cluster_names
from koordweb.views.common import current_cluster, select_cluster

# Pages bound to one cluster's objects: after a switch they go back to the cluster's list.
_LISTS = {"/jobs/": "jobs", "/preemptions/": "preemptions", "/rounds/": "rounds"}


def cluster_navigation(request: HttpRequest) -> dict[str, Any]:
    """`nav_clusters` (names) and `nav_cluster` for base.html; nothing before login."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    cluster = current_cluster(request)
    names = cluster_names()
    return {"nav_clusters": names, "nav_cluster": cluster.name if cluster else ""}


@require_POST
@login_required
def cluster_switch(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("cluster", "")
    cluster = cluster_by_name(name) if name else None
    if cluster is None:
        raise Http404("no such cluster")
    select_cluster(request, cluster)
    back = request.POST.get("next") or "/"
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}):
        back = "/"
    path = back.split("?", 1)[0]
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[1].isdigit() and f"/{parts[0]}/" in _LISTS:
        return redirect(_LISTS[f"/{parts[0]}/"])  # the other cluster's object: its list instead
    return redirect(path)
