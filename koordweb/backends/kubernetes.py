"""The kubernetes backend: a real cluster through the official client (koordweb/backends/kube/).

`sync` mirrors the cluster (list + watch, relisting after 410) and reconciles the rows;
`enact` binds, evicts and nominates through the API server, then records what it accepted.
One client per process and cluster: its watch threads keep the mirror current between rounds.
"""

from __future__ import annotations

import threading
from datetime import datetime

from django.conf import settings

from koordweb.backends.base import EnactPlan, EnactReport
from koordweb.backends.kube.client import KubeClusterClient
from koordweb.backends.reconcile import cluster_reconcile
from koordweb.models import Cluster
from koordweb.services import pods as pod_services

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
        cluster_reconcile(cluster=cluster, documents=self.client.snapshot(), now=now)

    def enact(self, cluster: Cluster, plan: EnactPlan, *, now: datetime) -> EnactReport:
        report = self.client.enact(plan)
        nodes = {n.name: n for n in cluster.nodes.all()}
        pod_services.enact_record(cluster_nodes=nodes, plan=plan, report=report, now=now)
        return report
