"""The outbox: what a round decided to do to its cluster, written with the round, enacted after.

A round records its plan and its intents in one transaction; only after that commits does it bind,
evict, nominate, create or delete anything in the cluster, and it settles each intent as the
cluster answers: deleted when done, kept a day with the reason when dropped. A worker that dies
between the two leaves pending intents, which the cluster's next round enacts before it plans.
Every action is idempotent, so enacting one twice changes nothing (a bind that finds the pod on
our node is success, an eviction of a pod already gone too).
"""

from __future__ import annotations

from django.db import models

from koordweb.models.cluster import Cluster
from koordweb.models.records import Round
from koordweb.models.workload import Pod


class Intent(models.Model):
    """One action on one pod of the cluster, decided by a round (or by a sync)."""

    class Kind(models.TextChoices):
        # In the order a round enacts them: pods exist before they are bound, victims leave
        # before their preemptors are nominated, deletions of refused gangs last.
        CREATE = "create", "create the pod"
        BIND = "bind", "bind the pod"
        EVICT = "evict", "evict the pod"
        NOMINATE = "nominate", "nominate a node for the pod"
        DELETE = "delete", "delete the pod"

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        DONE = "done", "done"  # settled rows are deleted, so stored only by older versions
        DROPPED = "dropped", "dropped: the cluster refused it or it no longer applies"

    # An intent lives from its plan's commit to its enact (a dropped one a day more): the table
    # stays small, so it carries no index but (cluster, state, step, id), and its references are
    # kept by the ORM's cascades rather than database constraints, whose checks at commit were a
    # third of the commit of a round binding 5,000 pods (migration 0013). The enact reads each
    # intent joined to its pod: one whose pod is gone is never enacted (and `_prune` drops it).
    cluster = models.ForeignKey(
        Cluster,
        on_delete=models.CASCADE,
        related_name="intents",
        db_index=False,
        db_constraint=False,
    )
    round = models.ForeignKey(
        Round,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="intents",
        db_index=False,
        db_constraint=False,
    )
    pod = models.ForeignKey(
        Pod, on_delete=models.CASCADE, related_name="intents", db_index=False, db_constraint=False
    )
    kind = models.CharField(max_length=10, choices=Kind.choices)
    step = models.PositiveSmallIntegerField()  # the kind's place in the enact order
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    node = models.CharField(max_length=253, blank=True)
    uid = models.CharField(max_length=64, blank=True)  # the pod decided about: a precondition
    payload = models.JSONField(default=dict, blank=True)
    outcome = models.TextField(blank=True)
    # A pending intent the cluster refused (a 403, a webhook's 400, ...) is tried again after a
    # back-off, up to INTENT_ATTEMPTS times, then dropped with the cluster's words: it fails its
    # own job, never the round (migration 0023).
    attempts = models.PositiveSmallIntegerField(default=0, db_default=0)
    not_before = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["cluster", "state", "step", "id"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.pod_id} ({self.state})"


STEPS = {kind: step for step, kind in enumerate(Intent.Kind)}


class PodManifest(models.Model):
    """A pod as the cluster first held it, so that koordweb can create it again exactly so.

    A gang a kubelet refused is deleted whole and created again: from this document (spec,
    labels, annotations as the API server stored them at creation), never from the rows koordweb
    schedules by. `controller` names the pod's controlling owner (`Kind/name`) when the pod is
    another controller's: koordweb then never creates it, its controller's replacement joins the
    job instead (migration 0023)."""

    pod = models.OneToOneField(
        Pod, on_delete=models.CASCADE, primary_key=True, related_name="manifest"
    )
    document = models.JSONField(default=dict)
    controller = models.CharField(max_length=400, blank=True)

    def __str__(self) -> str:
        return f"manifest of pod {self.pod_id}"
