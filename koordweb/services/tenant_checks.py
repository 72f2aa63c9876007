"""What a tenant's submission is checked against beyond its shape.

- the submission policy (`koordweb.manifests.policy`): a YAML submission is compared with the
  whitelist before it is parsed, so a scheduler-, status- or cluster-owned field is refused by
  its path and never reaches a row; a JSON submission's labels follow the same label rule;
- the team's namespaces: a quota may be used from its own namespace and from those its
  `quota.scheduling.koordinator.sh/namespaces` annotation lists (Koordinator's representation);
- the fields a tenant may write only as the cluster has them: the cluster's scheduler name and
  the priority class's preemption policy (as Kubernetes' Priority admission plugin does);
- the answer to a name that is taken, the same whether the job is the tenant's or not;
- the pod count (`limits.POD_COUNT`), counted in the YAML before it is parsed;
- the team's limits a quota row holds: jobs and pods left waiting (`pending_limits_check`, a
  429) and its toleration policy (`tolerations_admitted`, Kubernetes' PodTolerationRestriction).

Admins (is_staff) are not held to the policy checks: they import cluster dumps with full
fidelity. A team's limits hold for whoever submits into its quota.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ValidationError

from koordweb.limits import POD_COUNT
from koordweb.manifests.errors import ManifestError
from koordweb.manifests.loader import load_documents
from koordweb.manifests.objects import POD, ManifestSet, ParsedObject
from koordweb.manifests.parse import parse_documents
from koordweb.manifests.policy import JOB_OWNED_LABELS, refused_fields, refused_labels
from koordweb.models import Cluster, ElasticQuota, Job, JobState, Pod, PodPhase, PriorityClass
from koordweb.selectors.tenancy import quota_namespaces, user_is_admin
from koordweb.unencodable import first_unencodable


def manifests_submitted(*, user: Any, text: str) -> ManifestSet:
    """A YAML job submission, loaded, held to the policy (tenants) and parsed."""
    try:
        documents = load_documents(text)
    except ManifestError as exc:
        raise ValidationError({"manifest": [str(exc)]}) from exc
    where = first_unencodable(documents)
    if where is not None:
        raise ValidationError(
            {"manifest": [f"{where} holds a lone surrogate escape (such as \\ud800)"]}
        )
    pods = sum(1 for d in documents if isinstance(d, dict) and d.get("kind") == POD)
    # Counted before anything is parsed: 16,588 pods once took 8.4 s to be read.
    refused = POD_COUNT.errors(pods) if pods else []
    if refused:
        raise ValidationError({"replicas": [f"{pods:,} Pod documents: {refused[0]}"]})
    if not user_is_admin(user):
        errors: dict[str, list[str]] = {}
        for index, document in enumerate(documents, start=1):
            if not isinstance(document, dict):
                continue  # the parser names what is wrong with it
            for refusal in refused_fields(document):
                errors.setdefault(refusal.path, []).append(f"document {index}: {refusal.message}")
        if errors:
            raise ValidationError(errors)
    try:
        manifests = parse_documents(documents)
    except ManifestError as exc:
        raise ValidationError({"manifest": [str(exc)]}) from exc
    # An import of objects a cluster already has takes Koordinator's defaults for what it would
    # not use (with a warning); a new submission is told instead, and nothing is written.
    if manifests.warnings:
        raise ValidationError({"manifest": manifests.warnings})
    return manifests


def labels_check(*, user: Any, labels: dict[str, str]) -> None:
    """The policy's label rule for a JSON submission's `labels` (its only metadata); an admin
    may set any label but those the job's own fields set (`policy.JOB_OWNED_LABELS`)."""
    refusals = refused_labels(labels)
    if user_is_admin(user):
        refusals = [r for r in refusals if r.keys[-1] in JOB_OWNED_LABELS]
    if refusals:
        raise ValidationError({refusal.path: [refusal.message] for refusal in refusals})


def namespace_check(*, user: Any, quota: ElasticQuota | None, namespace: str) -> None:
    """A tenant submits only into a namespace of the quota it uses."""
    if quota is None or user_is_admin(user):
        return
    allowed = quota_namespaces(quota)
    if namespace not in allowed:
        raise ValidationError(
            {
                "namespace": [
                    f"namespace {namespace} is not one of quota {quota.name}'s namespaces "
                    f"({', '.join(sorted(allowed))})"
                ]
            }
        )


def pod_fields_check(
    *, user: Any, cluster: Cluster, pod: ParsedObject, priority_class: PriorityClass | None
) -> None:
    """`spec.schedulerName` and `spec.preemptionPolicy` only as the cluster has them."""
    if user_is_admin(user):
        return
    where = f"document {pod.index}"
    scheduler = pod.extra.get("scheduler_name") or ""
    if scheduler and scheduler != cluster.scheduler_name:
        raise ValidationError(
            {
                "spec.schedulerName": [
                    f"{where}: spec.schedulerName must be this cluster's scheduler "
                    f"({cluster.scheduler_name}) or left out"
                ]
            }
        )
    policy = pod.extra.get("preemption_policy") or ""
    if policy and (priority_class is None or policy != priority_class.preemption_policy):
        class_policy = priority_class.preemption_policy if priority_class else "none"
        raise ValidationError(
            {
                "spec.preemptionPolicy": [
                    f"{where}: spec.preemptionPolicy must match the priority class's "
                    f"({class_policy}) or be left out"
                ]
            }
        )


def name_taken(namespace: str, name: str) -> ValidationError:
    """The same answer whoever holds the name: it never says whose job it is."""
    return ValidationError(
        {"name": [f"the name {namespace}/{name} is taken in this cluster; choose another"]}
    )


class TenantLimitExceeded(ValidationError):
    """A team's limit reached (the API answers 429): which limit, its value and what is left."""

    def __init__(self, *, limit: str, value: int, remaining: int, message: str) -> None:
        super().__init__({"quota": [message]})
        self.limit, self.value, self.remaining = limit, value, remaining


def pending_limits_check(*, quota: ElasticQuota | None, pods: int) -> None:
    """A team may leave at most `max_pending_jobs` jobs and `max_pending_pods` pods waiting
    (ResourceQuota's count/pods idea): a new job of `pods` pods that would pass either is
    refused. The caller holds the quota row locked, so two submissions cannot both pass."""
    if quota is None:
        return
    waiting = Job.objects.filter(quota=quota, state__in=JobState.WAITING)
    jobs = waiting.count()
    if jobs + 1 > quota.max_pending_jobs:
        left = max(0, quota.max_pending_jobs - jobs)
        raise TenantLimitExceeded(
            limit="max_pending_jobs",
            value=quota.max_pending_jobs,
            remaining=left,
            message=f"quota {quota.name} may have at most {quota.max_pending_jobs:,} jobs "
            f"waiting (max_pending_jobs); {jobs:,} wait, {left:,} left",
        )
    parked = Pod.objects.filter(job__in=waiting, phase=PodPhase.PENDING, node__isnull=True).count()
    if parked + pods > quota.max_pending_pods:
        left = max(0, quota.max_pending_pods - parked)
        raise TenantLimitExceeded(
            limit="max_pending_pods",
            value=quota.max_pending_pods,
            remaining=left,
            message=f"quota {quota.name} may have at most {quota.max_pending_pods:,} pods "
            f"waiting (max_pending_pods); {parked:,} wait, {left:,} left, this job has {pods:,}",
        )


def quota_locked(quota: ElasticQuota | None) -> ElasticQuota | None:
    """The quota row again, locked until the transaction ends (PostgreSQL; SQLite serialises
    writers itself), with the limits as they are now."""
    if quota is None:
        return None
    return ElasticQuota.objects.select_for_update().get(pk=quota.pk)


# PodTolerationRestriction, per team ---------------------------------------------------------


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    fields = ("key", "operator", "value", "effect", "tolerationSeconds")
    normal = {"operator": "Equal"}
    return all((a.get(f) or normal.get(f, "")) == (b.get(f) or normal.get(f, "")) for f in fields)


def toleration_covers(allowed: Mapping[str, Any], toleration: Mapping[str, Any]) -> bool:
    """Kubernetes' `isSuperset`: does the allowed toleration cover this one? Its key (an empty
    key with Exists covers every key), its value (Exists covers every value), its effect (empty
    covers every effect) and, for NoExecute, a tolerationSeconds no longer than its own."""
    if _same(allowed, toleration):
        return True
    operator = allowed.get("operator") or "Equal"
    if allowed.get("key", "") not in ("", toleration.get("key", "")):
        return False
    if not allowed.get("key") and operator != "Exists":
        return False
    if operator != "Exists":
        if (toleration.get("operator") or "Equal") != "Equal":
            return False
        if allowed.get("value", "") != toleration.get("value", ""):
            return False
    if allowed.get("effect") and allowed.get("effect") != toleration.get("effect"):
        return False
    if allowed.get("effect") == "NoExecute" and allowed.get("tolerationSeconds") is not None:
        seconds = toleration.get("tolerationSeconds")
        if seconds is None or seconds > allowed["tolerationSeconds"]:
            return False
    return True


def _conflicts(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Kubernetes' `IsConflict`: the same key and effect, but another operator, value or
    tolerationSeconds."""
    if a.get("key", "") != b.get("key", "") or a.get("effect", "") != b.get("effect", ""):
        return False
    return not _same(a, b)


def tolerations_admitted(
    *,
    quota: ElasticQuota | None,
    tolerations: Sequence[Mapping[str, Any]],
    field: str = "tolerations",
    where: str = "",
) -> list[dict[str, Any]]:
    """A pod's tolerations after its team's policy, as Kubernetes' PodTolerationRestriction
    admits a pod into a namespace: the team's defaults merged in (a pod toleration conflicting
    with a default is refused), then every toleration must be covered by one the team is
    allowed (`allowed_tolerations`; null allows any). Refused: a ValidationError naming each."""
    own = [dict(t) for t in tolerations]
    if quota is None:
        return own
    defaults = [dict(t) for t in quota.default_tolerations or []]
    for default in defaults:
        for toleration in own:
            if _conflicts(default, toleration):
                message = (
                    f"{where}{_text(toleration)} conflicts with quota {quota.name}'s default "
                    f"toleration {_text(default)}"
                )
                raise ValidationError({field: [message]})
    merged = own + [d for d in defaults if not any(_same(d, t) for t in own)]
    allowed = quota.allowed_tolerations
    if allowed is None:
        return merged
    refused = [t for t in merged if not any(toleration_covers(a, t) for a in allowed)]
    if refused:
        listed = ", ".join(_text(a) for a in allowed) or "none"
        raise ValidationError(
            {
                field: [
                    f"{where}{_text(t)} is not allowed for quota {quota.name} (it allows: {listed})"
                    for t in refused
                ]
            }
        )
    return merged


def _text(toleration: Mapping[str, Any]) -> str:
    """`dedicated=team-nlp:NoSchedule`, as kubectl writes a taint."""
    key = toleration.get("key") or "*"
    value = f"={toleration['value']}" if toleration.get("value") else ""
    effect = f":{toleration['effect']}" if toleration.get("effect") else ""
    return f"{key}{value}{effect}"
