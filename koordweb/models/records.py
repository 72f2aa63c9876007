"""The audit trail that rounds write: rounds, per-job decisions and preemptions."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.db import models
from django.db.models import OuterRef, Subquery

from koordweb.models.cluster import Cluster
from koordweb.models.workload import Job


class Round(models.Model):
    """One scheduling round of a cluster: a persisted, observable piece of background work."""

    class State(models.TextChoices):
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"

    class Trigger(models.TextChoices):
        TIMER = "timer", "timer"
        SUBMIT = "submit", "submission"
        MANUAL = "manual", "manual"
        DEFERRED = "deferred", "asked for while another round ran"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="rounds")
    state = models.CharField(max_length=10, choices=State.choices, default=State.RUNNING)
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.TIMER)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # The Celery worker that ran the round (cluster-affine workers: its lease owner); blank when
    # the round ran outside a worker (tests, commands).
    worker = models.CharField(max_length=200, blank=True, default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    engine_ms = models.PositiveIntegerField(null=True, blank=True)
    jobs_considered = models.PositiveIntegerField(default=0)
    jobs_placed = models.PositiveIntegerField(default=0)
    pods_bound = models.PositiveIntegerField(default=0)
    preemption_count = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    # The round's place in its cluster's history (1, 2, 3, ...), set when the row is created:
    # ids are shared by every cluster, so a cluster's ids skip. Null only for rows made outside
    # `engine.pipeline` (a test's history); pages then show the id.
    number = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["cluster", "-started_at"])]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "number"], name="uniq_round_number"),
        ]

    def __str__(self) -> str:
        # The admin's title for a round: which, where and when (in UTC, as the round page).
        when = self.started_at.astimezone(UTC)
        return (
            f"round {self.number_shown} of cluster {self.cluster.name}, "
            f"{when:%Y-%m-%d %H:%M:%S} UTC"
        )

    @property
    def number_shown(self) -> int:
        """The number pages show: the cluster's own count, the id for a row without one."""
        return self.number if self.number is not None else self.pk


class Decision(models.Model):
    """What a round decided for one job: placed, preempting or unschedulable, and why."""

    class Outcome(models.TextChoices):
        PLACED = "placed", "placed"
        PREEMPTING = "preempting", "preempting"
        UNSCHEDULABLE = "unschedulable", "unschedulable"
        WAITING = "waiting", "waiting"

    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="decisions")
    # Indexed by (job, -created_at) below (migration 0015).
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="decisions", db_index=False)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    reason = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["job", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.get_outcome_display()}: job {self.job} in round {self.round_id}"


def latest_decision(field: str) -> Subquery:
    """A Job queryset's annotation: `field` of each job's latest decision (None without one)."""
    latest: Any = Decision.objects.filter(job=OuterRef("pk")).order_by("-created_at", "-id")
    return Subquery(latest.values(field)[:1])


class Preemption(models.Model):
    """A job-level preemption: the preemptor, its whole-job victims, the rule and the cost."""

    class State(models.TextChoices):
        PLANNED = "planned", "planned"
        ENACTED = "enacted", "enacted"
        BLOCKED = "blocked", "blocked by a disruption budget"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="preemptions")
    round = models.ForeignKey(
        Round, on_delete=models.SET_NULL, null=True, blank=True, related_name="preemptions"
    )
    preemptor = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="preemptions_made")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PLANNED)
    reason = models.TextField(blank=True)
    cost = models.JSONField(default=dict, blank=True)
    nominations = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Outcome(models.TextChoices):
        """What became of the preemptor after it preempted (`engine.preemption_outcomes`)."""

        WAITING = "waiting", "waiting for its nominated nodes"
        STARTED = "started", "started on its nominated nodes"
        STARTED_ELSEWHERE = "started_elsewhere", "started, partly on other nodes"
        PREEMPTED_AGAIN = "preempted_again", "preempted again"
        GAVE_UP = "gave_up", "gave its nominated nodes up"
        LEFT = "left", "left the queue before it started"

    # Which preemption this is for its preemptor (1: the first), and what became of it: whether
    # and when the preemptor started on the nodes nominated for it, or why not.
    attempt = models.PositiveIntegerField(default=1)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.WAITING)
    outcome_reason = models.TextField(blank=True)
    outcome_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["cluster", "-created_at"]),
            models.Index(fields=["cluster", "outcome"], name="preemption_open_outcome"),
        ]

    def __str__(self) -> str:
        when = self.created_at.astimezone(UTC)
        return f"preemption by job {self.preemptor}, {when:%Y-%m-%d %H:%M:%S} UTC"


class PreemptionVictim(models.Model):
    """One victim job of a preemption, with the pods evicted and the resources freed."""

    preemption = models.ForeignKey(Preemption, on_delete=models.CASCADE, related_name="victims")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="preempted_by")
    pods = models.JSONField(default=list, blank=True)
    freed = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["preemption", "job"], name="uniq_victim"),
        ]

    def __str__(self) -> str:
        return f"job {self.job}, a victim of preemption {self.preemption_id}"
