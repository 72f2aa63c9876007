"""The audit trail pages: preemption ledger and timeline, and the round history."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from koordweb.figures.timeline import (
    PreemptionEvent,
    RoundPoint,
    VictimSpan,
    preemption_timeline,
    round_latency,
    round_phases,
)
from koordweb.forms import PreemptionFilterForm
from koordweb.presenters.details import cost_lines
from koordweb.presenters.reasons import preemption_sentence
from koordweb.presenters.rounds import round_metrics
from koordweb.presenters.rounds import round_phases as phase_times
from koordweb.selectors.preemptions import (
    PreemptionRow,
    preemption_cluster,
    preemption_detail,
    preemption_list,
)
from koordweb.selectors.rounds import round_cluster, round_detail, round_history
from koordweb.selectors.tenancy import quotas_of_member, user_is_admin
from koordweb.views.common import (
    current_cluster,
    int_param,
    job_scope,
    paginate,
    select_cluster,
)
from koordweb.views.jobs import LIVE_SECONDS
from scheduler.vocabulary import natural_key

PREEMPTIONS_PER_PAGE = 20
PREEMPTIONS_COUNTED = 2000
DECISIONS_PER_PAGE = 50


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
    matching, total = preemption_list(
        cluster,
        user=request.user,
        quota=filters.get("quota") or "",
        since=filters.get("since"),
        until=filters.get("until"),
        limit=PREEMPTIONS_COUNTED,
    )
    # One page of the ledger and its timeline; the totals are over every match (the newest
    # PREEMPTIONS_COUNTED of them).
    page = Paginator(matching, PREEMPTIONS_PER_PAGE).get_page(request.GET.get("page"))
    rows = list(page.object_list)
    reasons = [(row, _reason(row)) for row in rows]
    distinct = {reason for _, reason in reasons}
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "cluster": cluster,
        "form": form,
        "rows": reasons,
        "page": page,
        "query": query.urlencode(),
        # Said once above the table when every preemption on the page has the same reason.
        "shared_reason": distinct.pop() if len(distinct) == 1 and len(rows) > 1 else "",
        "total": total,
        "counted": len(matching),
        "live_seconds": LIVE_SECONDS,
        "figure": preemption_timeline(_events(rows)) if rows else None,
        "gpus_freed": round(sum(r.gpus_freed for r in matching), 2),
        "gpu_hours_lost": round(sum(r.gpu_hours_lost for r in matching), 2),
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
        RoundPoint(
            r.pk,
            r.started_at,
            r.state,
            r.duration_ms,
            r.jobs_placed,
            r.preemption_count,
            r.number_shown,
        )
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
    page_number = int_param(request, "page", 1, 1, 10_000)
    detail = (
        round_detail(
            cluster,
            pk,
            visible_jobs=job_scope(request.user, cluster),
            offset=(page_number - 1) * DECISIONS_PER_PAGE,
            limit=DECISIONS_PER_PAGE,
        )
        if cluster
        else None
    )
    if cluster is None or detail is None:
        raise Http404("no such round")
    decisions_page = Paginator(range(detail.visible_decisions), DECISIONS_PER_PAGE).get_page(
        page_number
    )
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
        "page": decisions_page,
        "query": "",
    }
    return render(request, "round_detail.html", context)
