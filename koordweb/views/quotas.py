"""The quota tree (min, max, used, runtime, the real headroom, borrowed and lent, waiting demand)
and an admin's quota edit form with units and a change history."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from koordweb.figures.capacity import quota_bars
from koordweb.forms import QuotaEditForm, QuotaResourceForm, default_resource
from koordweb.models import Cluster, ElasticQuota
from koordweb.presenters.quantities import (
    WHOLE_DEVICES,
    amount_in_unit,
    amounts_text,
    duration_text,
    quantity_text,
    resource_name,
)
from koordweb.presenters.words import quota_change_text
from koordweb.selectors.overview import resource_usage
from koordweb.selectors.quotas import (
    QuotaRow,
    cluster_quota_history,
    quota_by_name,
    quota_history,
    quota_pending,
    quota_table,
)
from koordweb.selectors.tenancy import quotas_visible, user_is_admin
from koordweb.services.ownership import KOORDWEB_OWNED_FIELDS
from koordweb.services.quotas import quota_update
from koordweb.views.common import current_cluster


def _amount(resource: str, amounts: dict[str, int] | None) -> str:
    if amounts is None:
        return "—"
    value = amounts.get(resource)
    return quantity_text(resource, value) if value else "—"


def _rows(table: list[QuotaRow], resources: list[str]) -> list[dict[str, Any]]:
    rows = []
    for row in table:
        q = row.use
        # Only the resources the quota limits or uses: ten columns of dashes hid the GPUs.
        shown = [
            name
            for name in resources
            if q.min.get(name) or q.max.get(name) or q.used.get(name) or row.waiting.get(name)
        ] or resources[:1]
        for i, name in enumerate(shown):
            rows.append(
                {
                    "quota": q,
                    "row": row,
                    "indent": "— " * q.depth,
                    "first": i == 0,
                    "span": len(shown),
                    "resource": name,
                    "label": resource_name(name),
                    "min": quantity_text(name, q.min.get(name)),
                    "max": quantity_text(name, q.max.get(name)),
                    "used": quantity_text(name, q.used.get(name, 0)),
                    "runtime": _amount(name, q.runtime) if q.runtime is not None else "—",
                    "may_use": quantity_text(name, row.may_use.get(name)),
                    "borrowed": _amount(name, row.borrowed),
                    "lent": _amount(name, row.lent),
                    "waiting": _amount(name, row.waiting),
                }
            )
    return rows


@login_required
def quota_list(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "quotas.html", {"cluster": None})
    table = quota_table(cluster)
    admin = user_is_admin(request.user)
    if not admin:
        # As the API: a tenant sees its own quotas and the ancestors that give them context.
        visible = set(quotas_visible(user=request.user).values_list("name", flat=True))
        table = [row for row in table if row.use.name in visible]
    tree = [row.use for row in table]
    resources = sorted({name for q in tree for name in (*q.min, *q.max, *q.used)}) or ["cpu"]
    default = default_resource(resources)
    form = QuotaResourceForm(
        request.GET or None, resources=resources, initial={"resource": default}
    )
    resource = form.cleaned_data["resource"] if form.is_valid() else default
    figure = (
        quota_bars([(q.name, q.min, q.max, q.used, q.runtime) for q in tree], resource)
        if tree
        else None
    )
    context = {
        "cluster": cluster,
        "form": form,
        "resource": resource,
        "resources": resources,
        "rows": _rows(table, resources),
        "settings": [
            {
                "quota": row.quota,
                "idle": duration_text(row.quota.gpu_idle_alert_minutes),
                "weight": amounts_text(row.quota.shared_weight)
                if row.quota.shared_weight
                else "as its max",
                "waiting_jobs": row.waiting_jobs,
            }
            for row in table
        ],
        "figure": figure,
        "admin": admin,
        "owned_by_cluster": cluster.backend == Cluster.Backend.KUBERNETES,
        "history": [
            (change, quota_change_text(change.changes))
            for change in (cluster_quota_history(cluster) if admin else [])
        ],
    }
    return render(request, "quotas.html", context)


def _edit_resources(cluster: Cluster, quota: ElasticQuota) -> list[str]:
    """The quota's own resources and the cluster's CPU, memory and whole cards."""
    own = {*(quota.min or {}), *(quota.max or {}), *(quota.shared_weight or {})}
    cluster_wide = {u.resource for u in resource_usage(cluster) if u.resource != "pods"}
    main = [r for r in cluster_wide if r in ("cpu", "memory") or r in WHOLE_DEVICES]
    return sorted(own | set(main), key=lambda r: (r not in ("cpu", "memory"), r))


def _plain_amounts(quota: ElasticQuota, resources: list[str]) -> dict[str, str]:
    """The amounts the form starts with as a person writes them ("4000" cores, "0.5" GiB),
    never "4000.0": the form's own initial is a float in the unit."""
    initial = {}
    for i, resource in enumerate(resources):
        for key, _ in QuotaEditForm.LISTS:
            stored = (getattr(quota, key) or {}).get(resource)
            if stored is not None:
                value = amount_in_unit(resource, stored)[0]
                initial[f"{key}_{i}"] = f"{value:.3f}".rstrip("0").rstrip(".")
    return initial


@login_required
def quota_edit(request: HttpRequest, name: str) -> HttpResponse:
    if not user_is_admin(request.user):
        # a tenant is not told whether a quota of that name exists (another team's or its own)
        raise Http404("no such quota")
    cluster = current_cluster(request)
    quota = quota_by_name(cluster, name) if cluster else None
    if cluster is None or quota is None:
        raise Http404("no such quota")
    owned = cluster.backend == Cluster.Backend.KUBERNETES
    resources = _edit_resources(cluster, quota)
    form = QuotaEditForm(
        request.POST or None,
        quota=quota,
        resources=resources,
        initial=_plain_amounts(quota, resources),
        owned_only=KOORDWEB_OWNED_FIELDS["ElasticQuota"] if owned else None,
    )
    if request.method == "POST" and form.is_valid():
        values = form.values()
        if owned:
            values = {k: v for k, v in values.items() if k in KOORDWEB_OWNED_FIELDS["ElasticQuota"]}
        try:
            change = quota_update(quota=quota, user=request.user, values=values)
        except ValidationError as error:
            for field_name, errors in error.message_dict.items():
                # min, max and shared weight span the table's rows: their sentences name the
                # resource themselves; a setting's error sits under its own field.
                for message in errors:
                    form.add_error(field_name if field_name in form.fields else None, message)
        else:
            messages.success(
                request, f"Saved quota {quota.name}." if change else "Nothing changed."
            )
            return redirect("quota-edit", name=quota.name)
    context = {
        "cluster": cluster,
        "quota": quota,
        "form": form,
        "owned": owned,
        "pending": quota_pending(quota),
        "history": [(c, quota_change_text(c.changes)) for c in quota_history(quota)],
    }
    # 200 with the errors on the form, as the submit page answers a refused job.
    return render(request, "quota_edit.html", context)
