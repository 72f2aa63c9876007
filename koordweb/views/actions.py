"""Pages that act: submit, what-if and cancel jobs, import YAML (admins), API tokens.

Each view validates a form and calls one service owned elsewhere (`services.jobs`,
`services.tokens`, `manifests`); the service's ValidationError is shown on the form.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from koordweb.engine.feasibility import ClusterRoom
from koordweb.forms import JobSubmitForm, ManifestUploadForm, TokenCreateForm
from koordweb.manifests.apply import apply_manifests
from koordweb.manifests.errors import ManifestError
from koordweb.manifests.parse import parse_manifests
from koordweb.models import Cluster
from koordweb.presenters.reasons import decision_sentence
from koordweb.presenters.words import priority_class_text, victims_sentence
from koordweb.selectors.submission import (
    submit_devices,
    submit_priority_class_rows,
    submit_quotas,
)
from koordweb.selectors.topology import gather_layer_names
from koordweb.services.jobs import (
    GatherRule,
    JobConflict,
    JobSpec,
    PodShape,
    job_cancel,
    job_spec_resolve,
    job_submit,
)
from koordweb.services.tokens import token_create, token_expired, token_list, token_revoke
from koordweb.services.whatif import job_whatif
from koordweb.views.cluster import placement_figure
from koordweb.views.common import admin_required, current_cluster, is_admin
from koordweb.views.jobs import get_visible_job, what_would_help
from scheduler.vocabulary import natural_key

logger = logging.getLogger("koordweb.views")


def _submit_form(request: HttpRequest, cluster: Cluster) -> JobSubmitForm:
    classes = submit_priority_class_rows(user=request.user, cluster=cluster)
    return JobSubmitForm(
        request.POST or None,
        quotas=submit_quotas(user=request.user, cluster=cluster),
        priority_classes=[(c.name, priority_class_text(c)) for c in classes],
        layers=gather_layer_names(cluster),
        admin=is_admin(request.user),
        devices=submit_devices(cluster),
    )


def _spec(form: JobSubmitForm, cluster: Cluster) -> JobSpec:
    data = form.cleaned_data
    gather: tuple[GatherRule, ...] = ()
    if data.get("gather_layer"):
        gather = (GatherRule(data["gather_layer"], data.get("gather_strategy") or "MustGather"),)
    return JobSpec(
        name=data["name"],
        namespace=data["namespace"],
        cluster=cluster.name,
        quota=data.get("quota") or None,
        priority_class=data.get("priority_class") or None,
        replicas=data["replicas"],
        min_available=data.get("min_available"),
        pod=PodShape(requests=form.requests()),
        gather=gather,
        duration_seconds=data.get("duration_seconds"),
    )


# The service's field names -> the form's, where they differ.
_FORM_FIELDS = {"topology": "gather_layer", "pod": "gpus"}


def _errors_into(form: Any, error: ValidationError) -> None:
    """Put the service's field errors on the form's fields where they exist, else on top."""
    if hasattr(error, "error_dict"):
        for field_name, errors in error.message_dict.items():
            name = _FORM_FIELDS.get(field_name, field_name)
            target = name if name in form.fields else None
            for message in errors:
                form.add_error(target, f"{field_name}: {message}" if target is None else message)
    else:
        for message in error.messages:
            form.add_error(None, message)


def _what_if(request: HttpRequest, form: JobSubmitForm, cluster: Cluster) -> dict[str, Any]:
    """The engine's plan for the form's job on the live state, in words, with its nodes
    highlighted; a job that can never run is refused before (a form error)."""
    spec = _spec(form, cluster)
    resolved = job_spec_resolve(user=request.user, spec=spec)
    try:
        plan = job_whatif(user=request.user, resolved=resolved)
    except Exception:
        # An engine failure is ours, not the user's: log it and say so on the page.
        logger.exception("what-if planning failed")
        form.add_error(None, "The scheduling engine could not plan this job; try again later.")
        return {}
    verdict = plan.get("verdict") or {}
    preemption = plan.get("preemption") or {}
    if plan["outcome"] == "placed":
        why = decision_sentence("placed", "", plan.get("decision") or {})
    elif plan["outcome"] == "preempting":
        why = decision_sentence("preempting", "", {"nominations": preemption.get("nominations")})
    else:
        why = decision_sentence("unschedulable", verdict.get("reason"), verdict.get("details"))
    nodes = set(plan["placement"].values()) | set((preemption.get("nominations") or {}).values())
    counterfactual = (verdict.get("details") or {}).get("counterfactual")
    help_text = what_would_help(
        counterfactual,
        why,
        ClusterRoom(cluster),
        spec.pod.requests,
        resolved.min_available,
        resolved.topology_spec,
        None if is_admin(request.user) else set(),
    )
    victims = list(preemption.get("victim_jobs") or [])
    return {
        "outcome": plan["outcome"],
        "why": why,
        "nodes": sorted(nodes, key=natural_key),
        "pods": len(plan["placement"]) or len(preemption.get("nominations") or {}),
        "victims": victims,
        "hidden_victims": preemption.get("other_tenants_victim_jobs") or 0,
        "victims_sentence": victims_sentence(
            [str(v) for v in victims], int(preemption.get("other_tenants_victim_jobs") or 0)
        ),
        "counterfactual": help_text,
        "figure": placement_figure(cluster, nodes) if nodes else None,
    }


@login_required
def job_submit_page(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "job_submit.html", {"cluster": None})
    form = _submit_form(request, cluster)
    what_if: dict[str, Any] = {}
    if request.method == "POST" and form.is_valid():
        try:
            if request.POST.get("action") == "what-if":
                what_if = _what_if(request, form, cluster)
            else:
                job, _ = job_submit(user=request.user, spec=_spec(form, cluster))
                messages.success(request, f"Submitted {job}; the next round will consider it.")
                return redirect("job-detail", pk=job.pk)
        except ValidationError as error:
            _errors_into(form, error)
    context = {"cluster": cluster, "form": form, "what_if": what_if}
    return render(request, "job_submit.html", context)


@require_POST
@login_required
def job_cancel_page(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_visible_job(request, pk)
    try:
        job_cancel(job=job, user=request.user, reason=request.POST.get("reason", "")[:500])
    except JobConflict as conflict:
        messages.error(request, str(conflict))
    else:
        messages.success(request, f"Cancelled {job}.")
    return redirect("job-detail", pk=job.pk)


@admin_required
def import_page(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    form = ManifestUploadForm(request.POST or None, request.FILES or None)
    result: dict[str, Any] = {}
    if request.method == "POST" and form.is_valid() and cluster is not None:
        try:
            manifests = parse_manifests(form.cleaned_data["yaml"])
            if form.cleaned_data["dry_run"]:
                result = {"counts": manifests.counts(), "dry_run": True}
            else:
                result = {"counts": apply_manifests(cluster, manifests), "dry_run": False}
        except ManifestError as error:
            form.add_error(None, str(error))
    status = 400 if form.errors else 200
    context = {"cluster": cluster, "form": form, "result": result}
    return render(request, "import.html", context, status=status)


@never_cache
@login_required
def tokens_page(request: HttpRequest) -> HttpResponse:
    """The user's tokens; a new one's clear text is shown once, in a response no cache keeps
    (`Cache-Control: no-store`), never stored or redirected with."""
    form = TokenCreateForm(request.POST or None)
    new_token = ""
    if request.method == "POST" and form.is_valid():
        days = form.cleaned_data.get("expiry_days")
        try:
            _, new_token = token_create(
                user=request.user, expiry=timedelta(days=days) if days else None
            )
        except ValidationError as error:
            _errors_into(form, error)
    now = timezone.now()
    tokens = [(t, token_expired(t, now)) for t in token_list(user=request.user)]
    shown = form if form.errors else TokenCreateForm()
    context = {"form": shown, "tokens": tokens, "new_token": new_token}
    return render(request, "tokens.html", context, status=400 if form.errors else 200)


@require_POST
@login_required
def token_revoke_page(request: HttpRequest, token_key: str) -> HttpResponse:
    if token_revoke(user=request.user, token_key=token_key):
        messages.success(request, f"Revoked token {token_key}.")
    else:
        messages.error(request, "No such token.")
    return HttpResponseRedirect(reverse("tokens"))
