"""The audit trail pages: preemption ledger and timeline, round history, and the quota tree."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from koordweb.figures.capacity import quota_bars
from koordweb.figures.timeline import (
    PreemptionEvent,
    RoundPoint,
    VictimSpan,
    preemption_timeline,
    round_latency,
    round_phases,
)
from koordweb.forms import PreemptionFilterForm, QuotaResourceForm, default_resource
from koordweb.presenters.details import cost_lines
from koordweb.presenters.quantities import quantity_text, resource_name
from koordweb.presenters.reasons import preemption_sentence
from koordweb.presenters.rounds import round_metrics
from koordweb.presenters.rounds import round_phases as phase_times
from koordweb.selectors.devices import natural_key
from koordweb.selectors.overview import latest_runtime_quota, quota_usage
from koordweb.selectors.preemptions import (
    PreemptionRow,
    preemption_cluster,
    preemption_detail,
    preemption_list,
)
from koordweb.selectors.rounds import round_cluster, round_detail, round_history
from koordweb.selectors.tenancy import quotas_of_member, quotas_visible, user_is_admin
from koordweb.views.common import current_cluster, job_scope, paginate, select_cluster
from koordweb.views.jobs import LIVE_SECONDS


def _job_url(pk: int | None) -> str:
    """A job's page; '' for another team's job (a tenant may not open it)."""
    return reverse("job-detail", args=[pk]) if pk is not None else ""


def _reason(row: PreemptionRow) -> str:
    """The rule and reason in words; for another team's preemptor only the rule (its quota
    unnamed)."""
    return preemption_sentence(row.reason, row.cost, preemptor_named=row.preemptor_visible)


def _events(rows: list[PreemptionRow]) -> list[PreemptionEvent]:
    return [
        PreemptionEvent(
            r.id,
            r.at,
            r.preemptor,
            r.state,
            _reason(r),
            tuple(
                VictimSpan(v.job, v.started_at, v.gpus_freed, v.gpu_hours_lost, _job_url(v.job_id))
                for v in r.victims
            ),
            _job_url(r.preemptor_id if r.preemptor_visible else None),
        )
        for r in rows
    ]


@login_required
def preemptions(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "preemptions.html", {"cluster": None})
    quotas = quotas_of_member(user=request.user).filter(cluster=cluster)
    names = list(quotas.order_by("name").values_list("name", flat=True))
    form = PreemptionFilterForm(request.GET or None, quotas=names)
    filters = form.cleaned_data if form.is_valid() else {}
    rows, total = preemption_list(
        cluster,
        user=request.user,
        quota=filters.get("quota") or "",
        since=filters.get("since"),
        until=filters.get("until"),
    )
    context = {
        "cluster": cluster,
        "form": form,
        "rows": [(row, _reason(row)) for row in rows],
        "total": total,
        "live_seconds": LIVE_SECONDS,
        "figure": preemption_timeline(_events(rows[:100])) if rows else None,
        "gpus_freed": round(sum(r.gpus_freed for r in rows), 2),
        "gpu_hours_lost": round(sum(r.gpu_hours_lost for r in rows), 2),
    }
    return render(request, "preemptions.html", context)


@login_required
def preemption_page(request: HttpRequest, pk: int) -> HttpResponse:
    cluster = preemption_cluster(pk)
    row = preemption_detail(cluster, pk, user=request.user) if cluster else None
    if cluster is None or row is None:
        raise Http404("no such preemption")
    select_cluster(request, cluster)
    for victim in row.victims:
        victim.pods = sorted(victim.pods, key=natural_key)  # "-2" before "-10"
    context = {
        "row": row,
        "nominations": sorted(row.nominations.items(), key=lambda item: natural_key(item[0])),
        "reason": _reason(row),
        "cost": cost_lines(row.cost),
        "figure": preemption_timeline(_events([row])),
    }
    return render(request, "preemption_detail.html", context)


@login_required
def rounds(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "rounds.html", {"cluster": None})
    history = round_history(cluster)
    page = paginate(request, history, per_page=50)
    recent = list(history[:100])
    points = [
        RoundPoint(r.pk, r.started_at, r.state, r.duration_ms, r.jobs_placed, r.preemption_count)
        for r in reversed(recent)
    ]
    context = {
        "cluster": cluster,
        "page": page,
        "figure": round_latency(points) if points else None,
    }
    return render(request, "rounds.html", context)


@login_required
def round_page(request: HttpRequest, pk: int) -> HttpResponse:
    # The round's own cluster, whichever was chosen (as a job's page does): the header follows.
    cluster = round_cluster(pk)
    detail = (
        round_detail(cluster, pk, visible_jobs=job_scope(request.user, cluster))
        if cluster
        else None
    )
    if cluster is None or detail is None:
        raise Http404("no such round")
    select_cluster(request, cluster)
    found = detail.round
    phases = phase_times(found.metrics)
    preempted, _ = preemption_list(cluster, user=request.user, round_id=found.pk)
    context = {
        "detail": detail,
        "round": found,
        "metrics": round_metrics(
            found.metrics, duration_ms=found.duration_ms, admin=user_is_admin(request.user)
        ),
        "figure": round_phases(phases) if any(ms for _, ms in phases) else None,
        "preemptions": [(row, _reason(row)) for row in preempted],
    }
    return render(request, "round_detail.html", context)


@login_required
def quotas(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "quotas.html", {"cluster": None})
    tree = quota_usage(cluster, latest_runtime_quota(cluster))
    if not user_is_admin(request.user):
        # As the API: a tenant sees its own quotas and the ancestors that give them context.
        visible = set(quotas_visible(user=request.user).values_list("name", flat=True))
        tree = [q for q in tree if q.name in visible]
    resources = sorted({name for q in tree for name in (*q.min, *q.max, *q.used)}) or ["cpu"]
    default = default_resource(resources)
    form = QuotaResourceForm(
        request.GET or None, resources=resources, initial={"resource": default}
    )
    resource = form.cleaned_data["resource"] if form.is_valid() else default
    rows = []
    for q in tree:
        # Only the resources the quota limits or uses: ten columns of dashes hid the GPUs.
        shown = [
            name
            for name in resources
            if q.min.get(name) or q.max.get(name) or q.used.get(name) or (q.runtime or {}).get(name)
        ] or resources[:1]
        for i, name in enumerate(shown):
            rows.append(
                {
                    "quota": q,
                    "indent": "— " * q.depth,
                    "first": i == 0,
                    "span": len(shown),
                    "resource": name,
                    "label": resource_name(name),
                    "min": _shown(name, q.min.get(name)),
                    "max": _shown(name, q.max.get(name)),
                    "used": _shown(name, q.used.get(name)),
                    "runtime": _shown(name, q.runtime.get(name)) if q.runtime is not None else "—",
                }
            )
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
        "rows": rows,
        "figure": figure,
        "has_runtime": any(q.runtime is not None for q in tree),
    }
    return render(request, "quotas.html", context)


def _shown(resource: str, amount: int | None) -> str:
    return quantity_text(resource, amount)
