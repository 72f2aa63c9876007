"""The kubernetes backend: a real cluster through the official client (koordweb/backends/kube/).

`sync` mirrors the cluster (list + watch, relisting after 410) and reconciles the rows;
`enact` binds, evicts and nominates through the API server, then records what it accepted.
One client per process and cluster: its watch threads keep the mirror current between rounds.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from typing import Any

from django.conf import settings

from koordweb.backends.base import EnactPlan, EnactReport
from koordweb.backends.kube import ApiException, KubeClusterClient
from koordweb.backends.reconcile import cluster_reconcile
from koordweb.manifests import serialize
from koordweb.models import Cluster, Job, Pod, PodPhase
from koordweb.services import pods as pod_services
from koordweb.services.pods import FINAL_JOB_STATES

_clients: dict[str, KubeClusterClient] = {}
_lock = threading.Lock()


def client_from_settings(scheduler_name: str) -> KubeClusterClient:
    """The process's client: KUBECONFIG when set, the in-cluster service account otherwise."""
    key = f"{settings.KUBECONFIG}|{scheduler_name}"
    with _lock:
        found = _clients.get(key)
        if found is None:
            if settings.KUBECONFIG:
                found = KubeClusterClient.from_kubeconfig(
                    settings.KUBECONFIG, scheduler_name=scheduler_name
                )
            else:
                found = KubeClusterClient.in_cluster(scheduler_name=scheduler_name)
            _clients[key] = found
        return found


class KubernetesBackend:
    name = "kubernetes"

    def __init__(self, client: KubeClusterClient) -> None:
        self.client = client

    @classmethod
    def from_settings(cls, scheduler_name: str | None = None) -> KubernetesBackend:
        return cls(client_from_settings(scheduler_name or settings.KOORDWEB_SCHEDULER_NAME))

    def sync(self, cluster: Cluster, *, now: datetime) -> None:
        self.publish_jobs(cluster, now=now)
        cluster_reconcile(cluster=cluster, documents=self.client.snapshot(), now=now)

    def publish_jobs(self, cluster: Cluster, *, now: datetime, wait_seconds: float = 10.0) -> int:
        """Create in the cluster the pods of jobs submitted to koordweb (pods without a uid).

        Then wait until the mirror has seen them, so the reconcile that follows does not take
        them for pods that vanished.
        """
        pods = list(
            cluster.pods.filter(uid="", node__isnull=True, phase=PodPhase.PENDING)
            .exclude(job__state__in=FINAL_JOB_STATES)
            .select_related("job", "job__quota")
            .order_by("job_id", "name")
        )
        by_job: dict[int, list[Pod]] = {}
        for pod in pods:
            by_job.setdefault(pod.job_id, []).append(pod)
        published: set[tuple[str, str]] = set()
        for members in by_job.values():
            job = members[0].job
            docs = [_fresh(serialize.pod_doc(pod, job, {})) for pod in members]
            group = serialize.pod_group_doc(job) if job.kind == Job.Kind.POD_GROUP else None
            try:
                created = self.client.create_job_pods(job.namespace, docs, group)
            except ApiException as error:
                # The cluster refuses this job (no such namespace, a quota, a webhook): it fails
                # alone, with the API server's own words, and the round goes on.
                pod_services.job_mark_failed(job=job, reason=_api_message(error), now=now)
                continue
            for pod, doc in zip(members, created, strict=True):
                pod.uid = (doc.get("metadata") or {}).get("uid", "") or ""
                pod.save(update_fields=["uid"])
                published.add((pod.namespace, pod.name))
        if published:
            self._await_mirror(published, wait_seconds)
        return len(published)

    def _await_mirror(self, keys: set[tuple[str, str]], wait_seconds: float) -> None:
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            seen = {
                ((d.get("metadata") or {}).get("namespace"), (d.get("metadata") or {}).get("name"))
                for d in self.client.snapshot()
                if d.get("kind") == "Pod"
            }
            if keys <= seen:
                return
            time.sleep(0.05)

    def enact(self, cluster: Cluster, plan: EnactPlan, *, now: datetime) -> EnactReport:
        report = self.client.enact(plan)
        nodes = {n.name: n for n in cluster.nodes.all()}
        pod_services.enact_record(cluster_nodes=nodes, plan=plan, report=report, now=now)
        return report


def _fresh(doc: dict[str, Any]) -> dict[str, Any]:
    """A pod manifest to create: no status, no uid or resourceVersion of a previous life."""
    doc = dict(doc)
    doc.pop("status", None)
    metadata = dict(doc.get("metadata") or {})
    for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
        metadata.pop(key, None)
    doc["metadata"] = metadata
    return doc


def _api_message(error: ApiException) -> str:
    try:
        body = json.loads(error.body or "{}")
    except ValueError:
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return f"the cluster refused the job: {message or error.reason} ({error.status})"
