"""What a tenant's submission is checked against beyond its shape.

- the submission policy (`koordweb.manifests.policy`): a YAML submission is compared with the
  whitelist before it is parsed, so a scheduler-, status- or cluster-owned field is refused by
  its path and never reaches a row; a JSON submission's labels follow the same label rule;
- the team's namespaces: a quota may be used from its own namespace and from those its
  `quota.scheduling.koordinator.sh/namespaces` annotation lists (Koordinator's representation);
- the fields a tenant may write only as the cluster has them: the cluster's scheduler name and
  the priority class's preemption policy (as Kubernetes' Priority admission plugin does);
- the answer to a name that is taken, the same whether the job is the tenant's or not.

Admins (is_staff) are not held to these checks: they import cluster dumps with full fidelity.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from koordweb.manifests.errors import ManifestError
from koordweb.manifests.loader import load_documents
from koordweb.manifests.objects import ManifestSet, ParsedObject
from koordweb.manifests.parse import parse_documents
from koordweb.manifests.policy import JOB_OWNED_LABELS, refused_fields, refused_labels
from koordweb.models import Cluster, ElasticQuota, PriorityClass
from koordweb.selectors.tenancy import quota_namespaces, user_is_admin


def manifests_submitted(*, user: Any, text: str) -> ManifestSet:
    """A YAML job submission, loaded, held to the policy (tenants) and parsed."""
    try:
        documents = load_documents(text)
    except ManifestError as exc:
        raise ValidationError({"manifest": [str(exc)]}) from exc
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
