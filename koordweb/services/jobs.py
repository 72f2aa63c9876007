"""Submitting and cancelling jobs: the only code that creates Job and Pod rows for users.

`job_spec_resolve` checks a submission against the cluster (quota membership, topology layers,
whether any node can hold one pod, device combinations) without writing; `job_submit` writes the
job and its pods in one transaction and asks for a round once it commits; `job_cancel` ends a job.
Errors are Django ValidationErrors keyed by the submission's field names (the API answers 400).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from koordweb.backends.base import Deletion, EnactPlan
from koordweb.backends.intents import intents_write
from koordweb.engine.feasibility import job_feasibility_check
from koordweb.limits import DURATION, GANG_MODES, MIN_AVAILABLE, POD_COUNT, job_name_errors
from koordweb.manifests.apply import apply_manifests
from koordweb.manifests.errors import ManifestError
from koordweb.manifests.objects import POD, POD_GROUP, JobPlan, ManifestSet
from koordweb.models import (
    Cluster,
    ElasticQuota,
    Job,
    JobState,
    Node,
    Pod,
    PodPhase,
    PriorityClass,
    TopologyLayer,
)
from koordweb.rows.pods import pods_terminating
from koordweb.selectors.catalog import cluster_by_name
from koordweb.selectors.submission import submit_priority_classes
from koordweb.selectors.tenancy import quotas_of_member, user_is_admin
from koordweb.selectors.topology import card_counts
from koordweb.services.idempotency import fingerprint, job_submitted_once
from koordweb.services.rounds import round_request
from koordweb.services.tenant_checks import (
    labels_check,
    manifests_submitted,
    name_taken,
    namespace_check,
    pending_limits_check,
    pod_fields_check,
    quota_locked,
    tolerations_admitted,
)
from scheduler.api import validate_device_request
from scheduler.vocabulary import (
    DEFAULT_WAITING_SECONDS,
    DEVICE_RESOURCE_DOMAINS,
    GANG_MIN_AVAILABLE,
    GANG_MODE,
    GANG_NAME,
    GANG_TOPOLOGY_INDEX,
    GANG_TOPOLOGY_SPEC,
    GANG_TOTAL_NUMBER,
    GANG_WAITING_TIME,
    NVIDIA_GPU,
    QUOTA_NAME,
)

MAX_REPLICAS = POD_COUNT.maximum  # pods a job may have, whichever door it comes through
# Resources every node has implicitly or that the engine accounts for itself.
_UNCHECKED_RESOURCES = {"pods", "ephemeral-storage"}


class JobConflict(Exception):
    """The job is not in a state that allows the action (the API answers 409)."""


@dataclass(frozen=True)
class GatherRule:
    layer: str
    strategy: str  # MustGather | PreferGather


@dataclass(frozen=True)
class PodShape:
    requests: dict[str, int]
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class JobSpec:
    """A validated submission, in integer units, before it is checked against the cluster."""

    name: str
    pod: PodShape
    namespace: str = "default"
    cluster: str | None = None
    quota: str | None = None
    priority_class: str | None = None
    replicas: int = 1
    min_available: int | None = None
    mode: str = Job.Mode.STRICT
    waiting_time_seconds: int = 600
    gather: tuple[GatherRule, ...] = ()
    duration_seconds: int | None = None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ResolvedJob:
    """A spec with its cluster rows found: what `job_submit` writes and what-if plans."""

    spec: JobSpec
    cluster: Cluster
    quota: ElasticQuota | None
    priority_class: PriorityClass | None

    @property
    def priority(self) -> int:
        return self.priority_class.value if self.priority_class else 0

    @property
    def min_available(self) -> int:
        return self.spec.min_available or self.spec.replicas

    @property
    def topology_spec(self) -> dict[str, Any]:
        if not self.spec.gather:
            return {}
        rules = [{"layer": r.layer, "strategy": r.strategy} for r in self.spec.gather]
        return {"gatherStrategy": rules}


def _resolve_cluster(name: str | None) -> Cluster:
    cluster = cluster_by_name(name)
    if cluster is None:
        if name:
            raise ValidationError({"cluster": [f"unknown cluster {name!r}"]})
        raise ValidationError({"cluster": ["name the cluster: there is no default cluster"]})
    return cluster


def _resolve_quota(*, user: Any, cluster: Cluster, name: str | None) -> ElasticQuota | None:
    if not name:
        if user_is_admin(user):
            return None
        raise ValidationError({"quota": ["a quota is required: name one you are a member of"]})
    # Unknown and foreign quotas get the same answer, so a tenant cannot probe other tenants.
    quota = quotas_of_member(user=user).filter(cluster=cluster, name=name).first()
    if quota is None:
        raise ValidationError({"quota": [f"unknown quota {name!r}, or you are not a member of it"]})
    if quota.is_parent:
        raise ValidationError({"quota": [f"quota {name!r} is a parent quota; submit to a leaf"]})
    return quota


def _resolve_priority_class(
    *, user: Any, cluster: Cluster, name: str | None
) -> PriorityClass | None:
    """The named class (a tenant's only among those it may use), else the cluster's default."""
    if name:
        usable = submit_priority_classes(user=user, cluster=cluster)
        found = PriorityClass.objects.filter(cluster=cluster, name=name).first()
        if found is None or found.name not in usable:
            problem = "unknown priority class" if found is None else "a system priority class"
            raise ValidationError(
                {"priority_class": [f"{problem} {name!r}; this job may use: {usable}"]}
            )
        return found
    return PriorityClass.objects.filter(cluster=cluster, global_default=True).first()


def _check_fields(spec: JobSpec) -> None:
    """The limits every door holds a job to (`koordweb.limits`), checked once more here, where
    every submission passes: a door that forgot one (the YAML door's pod count, its gang name)
    cannot let it through."""
    errors: dict[str, list[str]] = {}
    checks: list[tuple[str, list[str]]] = [
        ("name", job_name_errors(spec.name)),
        ("replicas", POD_COUNT.errors(spec.replicas)),
        ("mode", [] if spec.mode in GANG_MODES else [f"must be one of {list(GANG_MODES)}"]),
    ]
    if spec.min_available is not None:
        checks.append(("min_available", MIN_AVAILABLE.errors(spec.min_available)))
    if spec.duration_seconds is not None:
        checks.append(("duration_seconds", DURATION.errors(spec.duration_seconds)))
    for name, reasons in checks:
        if reasons:
            errors[name] = reasons
    if errors:
        raise ValidationError(errors)


def _check_layers(cluster: Cluster, rules: tuple[GatherRule, ...]) -> None:
    known = set(TopologyLayer.objects.filter(cluster=cluster).values_list("name", flat=True))
    unknown = sorted({r.layer for r in rules} - known)
    if unknown:
        raise ValidationError(
            {"topology": [f"unknown topology layer {unknown}; this cluster has {sorted(known)}"]}
        )


def _largest_per_node(cluster: Cluster) -> dict[str, int]:
    """For each resource, the most any single node offers; whole cards (GPUs, NPUs, MLUs) as
    the engine counts them, from the Device CRs where a node does not report them."""
    largest: dict[str, int] = {}
    for allocatable in Node.objects.filter(cluster=cluster).values_list("allocatable", flat=True):
        for resource, amount in (allocatable or {}).items():
            if isinstance(amount, int):
                largest[resource] = max(largest.get(resource, 0), amount)
    for cards in card_counts(cluster).values():
        for resource, count in cards.items():
            largest[resource] = max(largest.get(resource, 0), count)
    return largest


def _check_shape(cluster: Cluster, requests: dict[str, int]) -> None:
    """Reject a pod that no node of the cluster could ever hold, whatever else is running."""
    if not Node.objects.filter(cluster=cluster).exists():
        return  # an empty cluster (still being loaded) cannot judge a shape
    largest = _largest_per_node(cluster)
    errors: list[str] = []
    for resource, amount in sorted(requests.items()):
        if amount == 0 or resource in _UNCHECKED_RESOURCES:
            continue
        if resource not in largest:
            if _is_device_resource(resource):
                continue  # shared-device resources are judged by the device validator
            errors.append(f"{resource}: no node of this cluster offers this resource")
        elif amount > largest[resource]:
            what = "GPUs" if resource == NVIDIA_GPU else resource
            errors.append(
                f"{resource}: a pod asks for {amount} {what}, more than any node has "
                f"(the largest offers {largest[resource]})"
            )
    if errors:
        raise ValidationError({"pod": errors})


def _is_device_resource(resource: str) -> bool:
    prefix = resource.split("/", 1)[0]
    return prefix in DEVICE_RESOURCE_DOMAINS


def _check_devices(requests: dict[str, int]) -> None:
    """Device combinations (shared GPU fractions, vNPU templates, ...) via the engine's rules."""
    problems = validate_device_request(dict(requests))
    if problems:
        raise ValidationError({"pod": [str(problem) for problem in problems]})


def job_spec_resolve(
    *, user: Any, spec: JobSpec, shapes: Sequence[Mapping[str, int]] = ()
) -> ResolvedJob:
    """Check a submission against the cluster without writing anything.

    `shapes` are the pods' requests when they differ (a YAML job); by default every pod is
    `spec.pod`. A job whose pods differ is judged pod shape by pod shape, its feasibility too
    (`job_feasibility_check`).
    """
    cluster = _resolve_cluster(spec.cluster)
    requests = _distinct(shapes) or [spec.pod.requests]
    errors: dict[str, list[str]] = {}
    resolved: dict[str, Any] = {}
    checks: list[tuple[str, Callable[[], Any]]] = [
        ("fields", lambda: _check_fields(spec)),
        ("quota", lambda: _resolve_quota(user=user, cluster=cluster, name=spec.quota)),
        ("labels", lambda: labels_check(user=user, labels=spec.labels)),
        (
            "priority_class",
            lambda: _resolve_priority_class(user=user, cluster=cluster, name=spec.priority_class),
        ),
        ("topology", lambda: _check_layers(cluster, spec.gather)),
    ]
    for shape in requests:
        checks.append(("shape", partial(_check_shape, cluster, shape)))
        checks.append(("devices", partial(_check_devices, shape)))
    checks.append(("feasible", lambda: job_feasibility_check(cluster, spec, shapes)))
    # Run every check so the caller learns about all problems at once.
    for key, check in checks:
        try:
            resolved[key] = check()
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                found = errors.setdefault(name, [])
                found.extend(m for m in messages if m not in found)
    if "quota" in resolved:
        quota = resolved["quota"]
        try:
            namespace_check(user=user, quota=quota, namespace=spec.namespace)
        except ValidationError as exc:
            errors.update(exc.message_dict)
        try:
            tolerations = tolerations_admitted(quota=quota, tolerations=spec.pod.tolerations)
        except ValidationError as exc:
            errors.update({f"pod.{name}": m for name, m in exc.message_dict.items()})
        else:
            spec = replace(spec, pod=replace(spec.pod, tolerations=tolerations))
    if errors:
        raise ValidationError(errors)
    return ResolvedJob(
        spec=spec,
        cluster=cluster,
        quota=resolved["quota"],
        priority_class=resolved["priority_class"],
    )


def _distinct(shapes: Sequence[Mapping[str, int]]) -> list[dict[str, int]]:
    distinct: list[dict[str, int]] = []
    for shape in shapes:
        if dict(shape) not in distinct:
            distinct.append(dict(shape))
    return distinct


def job_row(resolved: ResolvedJob, *, name: str, now: Any) -> Job:
    """The job row of a resolved submission, unsaved: what a submission stores and what a what-if
    plans (named `name`), one rule for both."""
    spec = resolved.spec
    annotations: dict[str, str] = {}
    if resolved.topology_spec:
        annotations[GANG_TOPOLOGY_SPEC] = json.dumps(resolved.topology_spec)
    return Job(
        cluster=resolved.cluster,
        namespace=spec.namespace,
        name=name,
        kind=Job.Kind.GANG,
        quota=resolved.quota,
        priority_class=resolved.priority_class,
        priority=resolved.priority,
        preemption_policy=(
            resolved.priority_class.preemption_policy
            if resolved.priority_class
            else Job._meta.get_field("preemption_policy").default
        ),
        min_available=resolved.min_available,
        total_number=spec.replicas,
        mode=spec.mode,
        waiting_time_seconds=spec.waiting_time_seconds,
        topology_spec=resolved.topology_spec,
        labels=dict(spec.labels),
        annotations=annotations,
        state=JobState.PENDING,
        duration_seconds=spec.duration_seconds,
        submitted_at=now,
    )


def job_pod_rows(job: Job, resolved: ResolvedJob, now: Any) -> list[Pod]:
    """The job's pods, unsaved: `<job>-<index>`, gang annotations, quota label, priority."""
    spec = resolved.spec
    labels = dict(spec.labels)
    if resolved.quota is not None:
        labels[QUOTA_NAME] = resolved.quota.name
    annotations = {
        GANG_NAME: spec.name,
        GANG_MIN_AVAILABLE: str(resolved.min_available),
        GANG_TOTAL_NUMBER: str(spec.replicas),
        GANG_MODE: spec.mode,
        GANG_WAITING_TIME: f"{spec.waiting_time_seconds}s",
    }
    if resolved.topology_spec:
        annotations[GANG_TOPOLOGY_SPEC] = json.dumps(resolved.topology_spec)
    policy = (
        resolved.priority_class.preemption_policy
        if resolved.priority_class
        else job.preemption_policy
    )
    return [
        Pod(
            cluster=resolved.cluster,
            job=job,
            namespace=spec.namespace,
            name=f"{spec.name}-{index}",
            scheduler_name=resolved.cluster.scheduler_name,
            requests=dict(spec.pod.requests),
            limits=dict(spec.pod.requests),
            node_selector=dict(spec.pod.node_selector),
            tolerations=list(spec.pod.tolerations),
            labels=labels,
            annotations={**annotations, GANG_TOPOLOGY_INDEX: str(index)}
            if resolved.topology_spec
            else dict(annotations),
            priority=resolved.priority,
            priority_class_name=resolved.priority_class.name if resolved.priority_class else "",
            preemption_policy=policy,
            topology_index=index,
            created_at=now,
        )
        for index in range(spec.replicas)
    ]


def job_submit(*, user: Any, spec: JobSpec, idempotency_key: str | None = None) -> tuple[Job, bool]:
    """Create the job and its pods; returns (job, created).

    With an idempotency key, a second submission by the same user returns the first job
    (created=False), also when the two race (`idempotency.job_submitted_once`).
    """
    owner = _owner(user)
    digest = fingerprint(asdict(spec))

    def create() -> Job:
        resolved = job_spec_resolve(user=user, spec=spec)
        with transaction.atomic():
            return _create_job(
                owner=owner, resolved=resolved, idempotency_key=idempotency_key, digest=digest
            )

    return job_submitted_once(
        owner=owner,
        key=idempotency_key,
        digest=digest,
        create=create,
        refused=lambda _exc: name_taken(spec.namespace, spec.name),
    )


def _owner(user: Any) -> Any:
    return user if user is not None and user.is_authenticated else None


def _create_job(
    *, owner: Any, resolved: ResolvedJob, idempotency_key: str | None, digest: str
) -> Job:
    spec = resolved.spec
    pending_limits_check(quota=quota_locked(resolved.quota), pods=spec.replicas)
    now = timezone.now()
    job = job_row(resolved, name=spec.name, now=now)
    job.owner = owner
    job.idempotency_key = idempotency_key or None
    job.idempotency_fingerprint = digest if idempotency_key else ""
    job.save(force_insert=True)
    Pod.objects.bulk_create(job_pod_rows(job, resolved, now))
    round_request(cluster_id=resolved.cluster.pk, trigger="submit")
    return job


def _submitted_plan(manifests: ManifestSet, *, user: Any) -> JobPlan:
    """The one new job a manifest submission may hold: PodGroup and Pods, pending, unbound."""
    other = sorted({obj.kind for obj in manifests.objects} - {POD, POD_GROUP})
    if other:
        raise ValidationError(
            {"manifest": [f"a job submission holds only PodGroups and Pods, not {other}"]}
        )
    plans = manifests.jobs
    if len(plans) != 1 or plans[0].existing or not plans[0].pods:
        names = [plan.gang_id for plan in plans]
        raise ValidationError({"manifest": [f"submit exactly one job with its pods, got {names}"]})
    for pod in plans[0].pods:
        if pod.refs.get("node") or pod.values.get("phase") != PodPhase.PENDING:
            raise ValidationError(
                {"manifest": [f"document {pod.index}: a submitted pod must be Pending and unbound"]}
            )
        if pod.extra.get("priority") is not None and not user_is_admin(user):
            # As Kubernetes' Priority admission: a priority comes from priorityClassName.
            raise ValidationError(
                {"manifest": [f"document {pod.index}: spec.priority comes from priorityClassName"]}
            )
    return plans[0]


def _plan_spec(plan: JobPlan, cluster: str | None) -> JobSpec:
    """A YAML job as the JobSpec `job_spec_resolve` checks (its pods' own shapes beside it)."""
    classes = sorted({pod.values["priority_class_name"] or "" for pod in plan.pods})
    if len(classes) > 1:
        raise ValidationError(
            {"priority_class": [f"the pods of job {plan.gang_id} name different classes {classes}"]}
        )
    first = plan.pods[0].values
    values = plan.values
    gather = (values.get("topology_spec") or {}).get("gatherStrategy") or []
    return JobSpec(
        name=plan.name,
        namespace=plan.namespace,
        cluster=cluster,
        quota=plan.quota_name or None,
        priority_class=classes[0] or None,
        replicas=len(plan.pods),
        min_available=values.get("min_available"),
        mode=values.get("mode") or Job.Mode.STRICT,
        waiting_time_seconds=values.get("waiting_time_seconds", DEFAULT_WAITING_SECONDS),
        gather=tuple(GatherRule(g["layer"], g["strategy"]) for g in gather),
        duration_seconds=values.get("duration_seconds"),
        pod=PodShape(
            requests=dict(first["requests"]),
            node_selector=dict(first.get("node_selector") or {}),
            tolerations=list(first.get("tolerations") or []),
        ),
    )


def job_submit_manifest(
    *, user: Any, text: str, cluster: str | None, idempotency_key: str | None
) -> tuple[Job, bool]:
    """Submit a job given as Kubernetes YAML: held to the submission policy, parsed by
    `koordweb.manifests`, then checked by `job_spec_resolve` like a JSON submission."""
    owner = _owner(user)
    digest = fingerprint(text)

    def create() -> Job:
        manifests = manifests_submitted(user=user, text=text)
        plan = _submitted_plan(manifests, user=user)
        resolved = job_spec_resolve(
            user=user,
            spec=_plan_spec(plan, cluster),
            shapes=[pod.values["requests"] for pod in plan.pods],
        )
        target = resolved.cluster
        for pod in plan.pods:
            pod_fields_check(
                user=user, cluster=target, pod=pod, priority_class=resolved.priority_class
            )
            pod.values["tolerations"] = tolerations_admitted(
                quota=resolved.quota,
                tolerations=pod.values.get("tolerations") or [],
                field="spec.tolerations",
                where=f"document {pod.index}: ",
            )
        if Job.objects.filter(cluster=target, namespace=plan.namespace, name=plan.name).exists():
            raise name_taken(plan.namespace, plan.name)
        with transaction.atomic():
            pending_limits_check(quota=quota_locked(resolved.quota), pods=len(plan.pods))
            apply_manifests(target, manifests)
            job = Job.objects.get(cluster=target, namespace=plan.namespace, name=plan.name)
            job.owner = owner
            job.idempotency_key = idempotency_key or None
            job.idempotency_fingerprint = digest if idempotency_key else ""
            job.save(update_fields=["owner", "idempotency_key", "idempotency_fingerprint"])
            round_request(cluster_id=target.pk, trigger="submit")
        return job

    return job_submitted_once(
        owner=owner,
        key=idempotency_key,
        digest=digest,
        create=create,
        refused=lambda exc: ValidationError({"manifest": [str(exc)]}),
        conflicts=(IntegrityError, ManifestError),
    )


@transaction.atomic
def job_cancel(*, job: Job, user: Any, reason: str = "") -> Job:
    """Cancel an active job: its pods stop (bound ones are marked terminating), a round follows."""
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if locked.state not in JobState.ACTIVE:
        raise JobConflict(
            f"job {locked.gang_id} is already {locked.state.lower()}; nothing to cancel"
        )
    now = timezone.now()
    who = getattr(user, "get_username", lambda: "")()
    locked.state = JobState.CANCELLED
    locked.state_reason = reason or f"cancelled by {who}".strip()
    locked.finished_at = now
    locked.save(update_fields=["state", "state_reason", "finished_at"])
    live = locked.pods.filter(phase__in=[PodPhase.PENDING, PodPhase.RUNNING])
    # Bound pods hold their nodes until the cluster has stopped them (a round deletes them).
    bound = list(live.filter(node__isnull=False))
    pods_terminating(pods=bound, now=now)
    in_cluster = list(live.exclude(uid=""))
    live.filter(node__isnull=True).update(phase=PodPhase.FAILED, finished_at=now)
    if locked.cluster.backend == Cluster.Backend.KUBERNETES and in_cluster:
        deletions = tuple(Deletion(p.id, p.namespace, p.name, p.uid) for p in in_cluster)
        intents_write(
            cluster=locked.cluster, round_id=None, plan=EnactPlan(deletions=deletions), now=now
        )
    round_request(cluster_id=locked.cluster_id, trigger="submit")
    return locked
