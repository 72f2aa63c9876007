"""What every page shares: which cluster is shown, who sees which jobs, paging and guards.

Who sees what is decided by `koordweb.selectors.tenancy` (shared with the API); these helpers
only add the cluster and the "admin sees everything" shortcut that lets selectors skip a filter.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from koordweb.models import Cluster, Job
from koordweb.selectors.catalog import cluster_by_name, cluster_default
from koordweb.selectors.tenancy import jobs_visible, user_is_admin

ViewFunc = TypeVar("ViewFunc", bound=Callable[..., HttpResponse])


def is_admin(user: Any) -> bool:
    return user_is_admin(user)


def visible_jobs(user: Any, cluster: Cluster | None = None) -> QuerySet[Job]:
    """Jobs the user may see (all for admins, their quotas' jobs for tenants)."""
    jobs = jobs_visible(user=user)
    return jobs.filter(cluster=cluster) if cluster is not None else jobs


def job_scope(user: Any, cluster: Cluster) -> QuerySet[Job] | None:
    """None when the user sees everything, which lets selectors skip the filter."""
    return None if is_admin(user) else visible_jobs(user, cluster)


CLUSTER_SESSION_KEY = "koordweb.cluster"


def current_cluster(request: HttpRequest) -> Cluster | None:
    """The cluster the user works on: ?cluster= (remembered in the session), else the one the
    session remembers, else the default one (`selectors.catalog.cluster_default`, as the API)."""
    asked = request.GET.get("cluster")
    found = cluster_by_name(asked) if asked else None
    if found is not None:
        select_cluster(request, found)
        return found
    remembered = request.session.get(CLUSTER_SESSION_KEY)
    return (cluster_by_name(remembered) if remembered else None) or cluster_default()


def select_cluster(request: HttpRequest, cluster: Cluster) -> None:
    """Remember the cluster for the next pages, forms and live fragments of this session."""
    if request.session.get(CLUSTER_SESSION_KEY) != cluster.name:
        request.session[CLUSTER_SESSION_KEY] = cluster.name


def admin_required(view: ViewFunc) -> ViewFunc:
    """Login first; then tenants get 403, never a page meant for admins."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_admin(request.user):
            raise PermissionDenied("admins only")
        return view(request, *args, **kwargs)

    return login_required(guarded)  # type: ignore[return-value]


def paginate(request: HttpRequest, items: Any, per_page: int = 50) -> Page:
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def int_param(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(request.GET.get(name, default))
    except (TypeError, ValueError):
        return default
    return max(low, min(high, value))
