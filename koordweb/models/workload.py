"""Workloads: priority classes, elastic quotas, jobs (gangs), their pods and disruption budgets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q

from koordweb.kubenames import toleration_errors
from koordweb.models.cluster import Cluster, Node
from koordweb.models.fields import validate_resource_list, validate_string_map
from scheduler.vocabulary import FINISHED_POD_PHASES, QUOTA_NAMESPACES


class PreemptionPolicy(models.TextChoices):
    PREEMPT_LOWER = "PreemptLowerPriority", "PreemptLowerPriority"
    NEVER = "Never", "Never"


class PriorityClass(models.Model):
    """A PriorityClass; Koordinator's bands are koord-prod/mid/batch/free."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="priority_classes")
    name = models.CharField(max_length=253)
    value = models.IntegerField()
    preemption_policy = models.CharField(
        max_length=24, choices=PreemptionPolicy.choices, default=PreemptionPolicy.PREEMPT_LOWER
    )
    global_default = models.BooleanField(default=False)
    description = models.CharField(max_length=500, blank=True)

    class Meta:
        verbose_name_plural = "priority classes"
        ordering = ["cluster", "-value", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="uniq_priority_class"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"


def validate_toleration_list(value: Any) -> None:
    """A list of tolerations in Kubernetes' spelling, each as the API server accepts it."""
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise ValidationError("must be a list of tolerations (objects with key, operator, ...)")
    for index, toleration in enumerate(value):
        for name, reason in toleration_errors(toleration).items():
            raise ValidationError(f"[{index}].{name} {reason}")


class ElasticQuota(models.Model):
    """A node of the elastic quota tree; tenants are the users who are members of a quota."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="quotas")
    namespace = models.CharField(max_length=63, default="default")
    name = models.CharField(max_length=253)
    parent = models.ForeignKey(
        "self", on_delete=models.RESTRICT, null=True, blank=True, related_name="children"
    )
    min = models.JSONField(default=dict, blank=True, validators=[validate_resource_list])
    max = models.JSONField(default=dict, blank=True, validators=[validate_resource_list])
    shared_weight = models.JSONField(null=True, blank=True, validators=[validate_resource_list])
    allow_lent = models.BooleanField(default=True)
    is_parent = models.BooleanField(default=False)
    labels = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    annotations = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="quotas")
    # A job of this quota whose cards stay idle longer than this is flagged (GPU monitoring).
    gpu_idle_alert_minutes = models.PositiveIntegerField(
        default=60, help_text="Flag a job whose GPUs have been idle for longer than this."
    )
    # A job of this quota that used less than this share of the GPU time it held over the
    # efficiency page's window is flagged as underused (busy, but not busy enough).
    gpu_efficiency_threshold_percent = models.PositiveSmallIntegerField(
        default=50,
        validators=[MaxValueValidator(100)],
        help_text="Flag a job that used less than this percent of the GPU time it held.",
    )
    # What a team may leave waiting (ResourceQuota's count/pods idea): a submission that would
    # go past either is refused with a 429 that names the limit and what is left.
    max_pending_jobs = models.PositiveIntegerField(
        default=500, help_text="Jobs of this quota that may wait for a placement at once."
    )
    max_pending_pods = models.PositiveIntegerField(
        default=8192, help_text="Pods of this quota's waiting jobs, all together."
    )
    # Kubernetes' PodTolerationRestriction per team (docs/operations.md, "Dedicating nodes to a
    # team"): defaults merged into every submitted pod, then each toleration must be covered by
    # one allowed here; null allows any, an empty list none.
    allowed_tolerations = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_toleration_list],
        help_text="Tolerations this team's pods may carry (Kubernetes spelling); "
        "null: any, []: none.",
    )
    default_tolerations = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_toleration_list],
        help_text="Tolerations added to every pod this team submits (Kubernetes spelling).",
    )

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="uniq_quota_name"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def listed_namespaces(self) -> set[str]:
        """The namespaces Koordinator's `quota.scheduling.koordinator.sh/namespaces` annotation
        lists (a JSON array of names; anything else in it is ignored)."""
        try:
            listed = json.loads((self.annotations or {}).get(QUOTA_NAMESPACES) or "[]")
        except (TypeError, ValueError):
            return set()
        if not isinstance(listed, list):
            return set()
        return {name for name in listed if isinstance(name, str) and name}


class JobState(models.TextChoices):
    """A job's state, with the sets of states the code asks about (one definition each)."""

    PENDING = "Pending", "Pending"
    SCHEDULED = "Scheduled", "Scheduled"
    RUNNING = "Running", "Running"
    SUCCEEDED = "Succeeded", "Succeeded"
    FAILED = "Failed", "Failed"
    PREEMPTED = "Preempted", "Preempted"
    CANCELLED = "Cancelled", "Cancelled"
    # Evicted: its pods are terminating and still hold their nodes; Preempted once they are gone.
    PREEMPTING = "Preempting", "Preempting"
    # Refused by a kubelet: its pods are being deleted; queued again (Pending) once they are gone.
    REQUEUEING = "Requeueing", "Requeueing"

    # Annotated only (no value), so the enum does not make them members; set below the class.
    # Jobs the scheduler may still place or keep running.
    ACTIVE: ClassVar[frozenset[JobState]]
    # Jobs whose pods the cluster still has on nodes: in every snapshot, holding what they use.
    HOLDING: ClassVar[frozenset[JobState]]
    # Jobs whose pods are being deleted and still hold their nodes until they are gone.
    TERMINATING: ClassVar[frozenset[JobState]]
    # Jobs waiting for a placement (a requeueing job waits once its pods are gone).
    WAITING: ClassVar[frozenset[JobState]]
    # Jobs placed by a round: scheduled or running on their nodes.
    PLACED: ClassVar[frozenset[JobState]]
    # Jobs that are over: nothing of theirs runs or will run.
    FINAL: ClassVar[frozenset[JobState]]


JobState.ACTIVE = frozenset({JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING})
JobState.TERMINATING = frozenset({JobState.PREEMPTING, JobState.REQUEUEING})
JobState.HOLDING = JobState.ACTIVE | JobState.TERMINATING
JobState.WAITING = frozenset({JobState.PENDING, JobState.REQUEUEING})
JobState.PLACED = frozenset({JobState.SCHEDULED, JobState.RUNNING})
JobState.FINAL = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.PREEMPTED, JobState.CANCELLED}
)


def job_state_from_pods(
    phases: Mapping[str, int], bound: int, min_available: int, current: str
) -> str:
    """A job's state from its pods' phases (pods per phase) and how many are bound: the one rule
    for the rounds (`rows.pods.job_refresh_states`) and for an imported dump (`manifests.jobs`).

    Every pod Succeeded -> Succeeded; any Failed -> Failed; every pod Running or Succeeded ->
    Running (a pod that finished first does not send a running job back); at least
    `min_available` bound -> Scheduled (the gang started); otherwise the job stays as it was."""
    total = sum(phases.values())
    if total == 0:
        return current
    succeeded = phases.get(PodPhase.SUCCEEDED, 0)
    if succeeded == total:
        return JobState.SUCCEEDED
    if phases.get(PodPhase.FAILED, 0):
        return JobState.FAILED
    if phases.get(PodPhase.RUNNING, 0) + succeeded == total:
        return JobState.RUNNING
    if bound >= min_available:
        return JobState.SCHEDULED
    return current


class Job(models.Model):
    """A gang: the unit the scheduler places whole, and the unit preemption evicts whole.

    A pod outside any gang is a job of its own (kind `pod`). A job's `gang_group` is the id of
    the group it is placed with (koordinator.md: member gang ids sorted and joined by ',').
    """

    class Mode(models.TextChoices):
        STRICT = "Strict", "Strict"
        NON_STRICT = "NonStrict", "NonStrict"

    class Kind(models.TextChoices):
        GANG = "gang", "annotation gang"
        POD_GROUP = "podgroup", "PodGroup"
        POD = "pod", "single pod"

    # Indexed by the composite indexes and the unique name it leads (migration 0015).
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="jobs", db_index=False
    )
    namespace = models.CharField(max_length=63, default="default")
    name = models.CharField(max_length=253)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.GANG)
    pod_group_api = models.CharField(max_length=64, blank=True)
    quota = models.ForeignKey(  # indexed by (quota, state)
        ElasticQuota,
        on_delete=models.RESTRICT,
        null=True,
        blank=True,
        related_name="jobs",
        db_index=False,
    )
    priority_class = models.ForeignKey(
        PriorityClass, on_delete=models.RESTRICT, null=True, blank=True, related_name="jobs"
    )
    priority = models.IntegerField(default=0)
    preemption_policy = models.CharField(
        max_length=24, choices=PreemptionPolicy.choices, default=PreemptionPolicy.PREEMPT_LOWER
    )
    min_available = models.PositiveIntegerField(default=1)
    total_number = models.PositiveIntegerField(default=1)
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.STRICT)
    waiting_time_seconds = models.PositiveIntegerField(default=600)
    gang_groups = models.JSONField(default=list, blank=True)
    gang_group = models.CharField(max_length=1000, blank=True)
    topology_spec = models.JSONField(default=dict, blank=True)
    labels = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    annotations = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="jobs",
    )
    state = models.CharField(max_length=10, choices=JobState.choices, default=JobState.PENDING)
    state_reason = models.TextField(blank=True)
    duration_seconds = models.PositiveIntegerField(null=True, blank=True)
    # How many times kubelets refused a pod of this job at admission (each one requeues it whole).
    admission_rejections = models.PositiveIntegerField(default=0)
    idempotency_key = models.CharField(max_length=128, null=True, blank=True)
    # A digest of the submission that used the key: the same key with another body is refused.
    idempotency_fingerprint = models.CharField(max_length=64, blank=True, default="")
    submitted_at = models.DateTimeField()
    scheduled_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "-priority", "submitted_at", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace", "name"], name="uniq_job_name"),
            models.UniqueConstraint(
                fields=["owner", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="uniq_job_idempotency_key",
            ),
            models.CheckConstraint(
                condition=Q(min_available__gte=1) & Q(min_available__lte=models.F("total_number")),
                name="job_min_available_in_range",
            ),
        ]
        indexes = [
            models.Index(fields=["cluster", "state"]),
            models.Index(fields=["quota", "state"]),
            models.Index(fields=["cluster", "submitted_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gang_id(self) -> str:
        return f"{self.namespace}/{self.name}"


class PodPhase(models.TextChoices):
    PENDING = "Pending", "Pending"
    RUNNING = "Running", "Running"
    SUCCEEDED = "Succeeded", "Succeeded"
    FAILED = "Failed", "Failed"


class Pod(models.Model):
    """A pod of a job. `requests` holds every resource (devices included) in integer units."""

    # Every write of a pod (thousands a round) updates each index: the cluster's and the node's
    # own indexes are left out, as (cluster, phase), (cluster, namespace, name) and (node, phase)
    # lead with them.
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="pods", db_index=False
    )
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="pods")
    namespace = models.CharField(max_length=63, default="default")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    scheduler_name = models.CharField(max_length=63, default="koordweb")
    requests = models.JSONField(default=dict, blank=True, validators=[validate_resource_list])
    limits = models.JSONField(default=dict, blank=True, validators=[validate_resource_list])
    node_selector = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    affinity = models.JSONField(default=dict, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    labels = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    annotations = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    priority = models.IntegerField(default=0)
    priority_class_name = models.CharField(max_length=253, blank=True)
    preemption_policy = models.CharField(
        max_length=24, choices=PreemptionPolicy.choices, default=PreemptionPolicy.PREEMPT_LOWER
    )
    node = models.ForeignKey(
        Node, on_delete=models.SET_NULL, null=True, blank=True, related_name="pods", db_index=False
    )
    # Indexed only where set (migration 0016): a node's deletion looks its nominated pods up,
    # and a bind, which clears the column, adds no entry.
    nominated_node = models.ForeignKey(
        Node,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="nominated_pods",
        db_index=False,
    )
    # When the current nomination was recorded: a gang that keeps nominated nodes longer than its
    # waiting time lets them go (scheduler/nominations.py).
    nominated_at = models.DateTimeField(null=True, blank=True)
    phase = models.CharField(max_length=10, choices=PodPhase.choices, default=PodPhase.PENDING)
    topology_index = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField()
    bound_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Deleted gracefully (evicted, cancelled, requeued): still on its node until the cluster says
    # it is gone; `terminating_since` is when koordweb or the cluster started its deletion.
    terminating = models.BooleanField(default=False)
    terminating_since = models.DateTimeField(null=True, blank=True)
    # The kind of the pod's owner (`metadata.ownerReferences`: DaemonSet when one of them is,
    # else the controller's, else the first's; empty without one). A DaemonSet's pods pass
    # LoadAware's Filter (migration 0024).
    owner_kind = models.CharField(max_length=63, blank=True)

    class Meta:
        ordering = ["cluster", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace", "name"], name="uniq_pod_name"),
        ]
        indexes = [
            models.Index(fields=["cluster", "phase"]),
            models.Index(fields=["node", "phase"]),
            models.Index(
                fields=["nominated_node"],
                condition=models.Q(nominated_node__isnull=False),
                name="pod_nominated_node_set",
            ),
            # Each round looks for the pods still terminating (a few) among every pod the cluster
            # ever ran: without it that read scanned the whole history (50-120 ms at 112,000 pods).
            models.Index(
                fields=["cluster"],
                condition=Q(terminating=True) & ~Q(phase__in=list(FINISHED_POD_PHASES)),
                name="pod_terminating_active",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class PodDisruptionBudget(models.Model):
    """policy/v1 PodDisruptionBudget: minAvailable or maxUnavailable (integer or percent)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pdbs")
    namespace = models.CharField(max_length=63, default="default")
    name = models.CharField(max_length=253)
    selector = models.JSONField(default=dict, blank=True)
    min_available = models.CharField(max_length=16, blank=True)
    max_unavailable = models.CharField(max_length=16, blank=True)

    class Meta:
        ordering = ["cluster", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace", "name"], name="uniq_pdb"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"
