"""The kubernetes backend: a real cluster through the official client (koordweb/backends/kube/).

`sync` reconciles the rows with the mirror (list + watch, relisting after 410): no call to the API
server, so it runs inside the round's transaction; it also asks for the pods of jobs submitted to
koordweb to be created (create intents, enacted with the round's plan after it commits).
`enact` creates, binds, evicts, nominates and deletes through the API server and writes nothing.
One client per process and cluster: its watch threads keep the mirror current between rounds.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings

from koordweb.backends.base import (
    Creation,
    EnactPlan,
    EnactReport,
    NodeGone,
    NodeRefused,
    PodNote,
)
from koordweb.backends.intents import intents_write
from koordweb.backends.kube import ApiException, KubeClusterClient, KubeUnavailable
from koordweb.backends.kube.events import StoryTeller
from koordweb.backends.kube.nodes import NodeActions, NodeMissing, refusal_words
from koordweb.backends.reconcile import cluster_reconcile
from koordweb.manifests import serialize
from koordweb.models import Cluster, Intent, Job, JobState, Pod, PodPhase
from koordweb.models.outbox import PodManifest

_clients: dict[str, KubeClusterClient] = {}
_lock = threading.Lock()
# One story teller per client: its Event correlator remembers what it wrote between rounds.
_tellers: weakref.WeakKeyDictionary[KubeClusterClient, StoryTeller] = weakref.WeakKeyDictionary()


def client_from_settings(scheduler_name: str) -> KubeClusterClient:
    """The process's client: KUBECONFIG when set, the in-cluster service account otherwise."""
    key = f"{settings.KUBECONFIG}|{scheduler_name}"
    with _lock:
        found = _clients.get(key)
        if found is None:
            options = {"scheduler_name": scheduler_name, **_api_budget()}
            if settings.KUBECONFIG:
                found = KubeClusterClient.from_kubeconfig(settings.KUBECONFIG, **options)
            else:
                found = KubeClusterClient.in_cluster(**options)
            _clients[key] = found
        return found


def _api_budget() -> dict[str, Any]:
    """The client's request budget and binding parallelism (kube-scheduler's names)."""
    return {
        "qps": float(settings.KOORDWEB_KUBE_API_QPS),
        "burst": int(settings.KOORDWEB_KUBE_API_BURST),
        "parallelism": int(settings.KOORDWEB_KUBE_BIND_PARALLELISM),
    }


class KubernetesBackend:
    name = "kubernetes"
    # Each intent is a call to the API server: outcomes are recorded every 2,000 of them.
    enact_chunk = 2000

    def __init__(self, client: KubeClusterClient) -> None:
        self.client = client

    @classmethod
    def from_settings(cls, scheduler_name: str | None = None) -> KubernetesBackend:
        return cls(client_from_settings(scheduler_name or settings.KOORDWEB_SCHEDULER_NAME))

    def prepare(self, cluster: Cluster) -> None:
        """Start the watch mirror and wait for its first list of every kind (or fail)."""
        self.client.snapshot()

    def sync(self, cluster: Cluster, *, now: datetime) -> dict[str, Any]:
        counts = cluster_reconcile(
            cluster=cluster,
            documents=self.client.snapshot(),
            now=now,
            # Rows the mirror does not hold yet are not gone until the mirror knows they are.
            unseen_uids=self.client.unseen(
                cluster.pods.exclude(uid="").values_list("uid", flat=True)
            ),
        )
        counts["creations"] = self._ask_creations(cluster, now)
        return counts

    def _ask_creations(self, cluster: Cluster, now: datetime) -> int:
        """Create intents for submitted pods not in the cluster yet (one pending per pod)."""
        asked = Intent.objects.filter(
            cluster=cluster, kind=Intent.Kind.CREATE, state=Intent.State.PENDING
        ).values("pod_id")
        pods = list(
            cluster.pods.filter(uid="", node__isnull=True, phase=PodPhase.PENDING)
            .exclude(job__state__in=JobState.FINAL)
            .exclude(id__in=asked)
            .values_list("id", "job_id", "namespace", "name")
        )
        pods = _without_adopted(pods)
        if pods:
            plan = EnactPlan(creations=tuple(Creation(*row) for row in pods))
            intents_write(cluster=cluster, round_id=None, plan=plan, now=now)
        return len(pods)

    def enact(self, cluster: Cluster, plan: EnactPlan, *, now: datetime) -> EnactReport:
        report = self._create(plan.creations) if plan.creations else EnactReport()
        rest = self.client.enact(plan)
        report.bound, report.dropped = rest.bound, rest.dropped
        report.evicted, report.blocked, report.replaced = rest.evicted, rest.blocked, rest.replaced
        report.nominated, report.deleted = rest.nominated, rest.deleted
        return report

    def _create(self, creations: tuple[Creation, ...]) -> EnactReport:
        """Create each job's pods (and PodGroup) under our scheduler; a refusal fails the job."""
        report = EnactReport()
        by_job: dict[int, list[Creation]] = defaultdict(list)
        for creation in creations:
            by_job[creation.job_id].append(creation)
        rows = {
            p.id: p
            for p in Pod.objects.filter(id__in=[c.pod_id for c in creations]).select_related(
                "job", "job__quota"
            )
        }
        kept = dict(
            PodManifest.objects.filter(pod_id__in=list(rows), controller="").values_list(
                "pod_id", "document"
            )
        )
        for members in by_job.values():
            pods = [rows[c.pod_id] for c in sorted(members, key=lambda c: c.name)]
            job = pods[0].job
            # A pod created before is created again as the cluster held it (the user's image,
            # command, environment...), never from the rows koordweb schedules by.
            docs = [_fresh(kept.get(pod.id) or serialize.pod_doc(pod, job, {})) for pod in pods]
            group = serialize.pod_group_doc(job) if job.kind == Job.Kind.POD_GROUP else None
            try:
                created = self.client.create_job_pods(job.namespace, docs, group)
            except ApiException as error:
                # The cluster refuses this job (no such namespace, a quota, a webhook): it fails
                # alone, with the API server's own words, and the round goes on.
                report.refused_jobs[job.id] = _api_message(error)
                continue
            for pod, doc in zip(pods, created, strict=True):
                report.created[pod.id] = (doc.get("metadata") or {}).get("uid", "") or ""
                if pod.id not in kept:
                    report.manifests[pod.id] = doc
        return report

    def refusal(self, error: Exception) -> str | None:
        """The API server's words when it answered the action with an error (403 Forbidden, a
        webhook's denial, 422 Invalid...); None when it could not be reached after the retries."""
        if isinstance(error, ApiException):
            return _api_words(error)
        if isinstance(error, KubeUnavailable | ConnectionError | TimeoutError):
            return None
        return f"{type(error).__name__}: {error}"[:2000]

    def explain(self, cluster: Cluster, notes: Sequence[PodNote], *, now: datetime) -> int:
        """Events and PodScheduled conditions for the notes, PodGroup status for our groups."""
        teller = _teller(self.client)
        pods: dict[tuple[str, str], dict[str, Any]] = {}
        for doc in self.client.mirror.documents("pods"):
            metadata = doc.get("metadata") or {}
            pods[(metadata.get("namespace") or "", metadata.get("name") or "")] = doc
        groups = self.client.mirror.documents("podgroups")
        return teller.tell(notes, pods, groups, self.client.scheduler_name, now.timestamp())

    def cordon(self, cluster: Cluster, node: str, *, unschedulable: bool) -> bool:
        """Patch the Node's `spec.unschedulable` through the API server, as kubectl cordon
        does; the watch mirror brings the change back and the next sync writes the row."""
        try:
            return NodeActions(self.client.api, self.client.retry).set_unschedulable(
                node, unschedulable
            )
        except NodeMissing as error:
            raise NodeGone(node) from error
        except ApiException as error:
            raise NodeRefused(refusal_words(error)) from error


def _fresh(doc: dict[str, Any]) -> dict[str, Any]:
    """A pod manifest to create: no status, no node, no uid or resourceVersion of a previous
    life (the API server sets them anew)."""
    doc = dict(doc)
    doc.pop("status", None)
    metadata = dict(doc.get("metadata") or {})
    for key in _SERVER_METADATA:
        metadata.pop(key, None)
    doc["metadata"] = metadata
    if "spec" in doc:
        doc["spec"] = {k: v for k, v in (doc["spec"] or {}).items() if k != "nodeName"}
    return doc


_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "managedFields",
    "selfLink",
)


def _without_adopted(pods: list[tuple[int, int, str, str]]) -> list[tuple[int, int, str, str]]:
    """Pods another controller owns are never created by koordweb: their rows go, and the
    controller's replacement, once the watch shows it, joins the job (sync imports it)."""
    owned = set(
        PodManifest.objects.filter(pod_id__in=[row[0] for row in pods])
        .exclude(controller="")
        .values_list("pod_id", flat=True)
    )
    if owned:
        Pod.objects.filter(id__in=owned, uid="").delete()
    return [row for row in pods if row[0] not in owned]


def _teller(client: KubeClusterClient) -> StoryTeller:
    with _lock:
        found = _tellers.get(client)
        if found is None:
            found = _tellers[client] = StoryTeller(client.api, client.retry, client.writer)
        return found


def _api_words(error: ApiException) -> str:
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return f"{message or error.reason} ({error.status})"[:2000]


def _api_message(error: ApiException) -> str:
    try:
        body = json.loads(error.body or "{}")
    except ValueError:
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return f"the cluster refused the job: {message or error.reason} ({error.status})"
