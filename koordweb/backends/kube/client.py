"""`KubeClusterClient`: the kubernetes backend's wire layer, one object per cluster.

It reads the cluster as manifests (`snapshot()`: every watched kind, kept current by list+watch
threads) and enacts decisions (`bind`, `evict`, `nominate`, `apply_object`, `create_job_pods`).
It never touches the database: the caller turns documents into rows and outcomes into records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client

from koordweb.backends.base import EnactPlan, EnactReport
from koordweb.backends.kube.connection import KubeUnavailable, RetryPolicy, api_client
from koordweb.backends.kube.kinds import WATCHED_KINDS, WatchedKind
from koordweb.backends.kube.mirror import ClusterMirror
from koordweb.backends.kube.objects import ObjectWriter
from koordweb.backends.kube.pods import BindResult, EvictOutcome, EvictResult, PodActions

Doc = dict[str, Any]
TERMINAL_PHASES = {"Succeeded", "Failed"}
# A created pod the watch has not delivered after this long is taken as gone.
UNSEEN_CREATED_SECONDS = 300.0


class KubeClusterClient:
    """A cluster behind the real kubernetes client; safe to share between threads."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        scheduler_name: str = "koordweb",
        retry: RetryPolicy | None = None,
        watch_timeout: int = 300,
        sync_timeout: float = 60.0,
        budget_attempts: int = 5,
        kinds: Iterable[WatchedKind] = WATCHED_KINDS,
    ) -> None:
        self.api = api
        self.scheduler_name = scheduler_name
        self.retry = retry or RetryPolicy()
        self.sync_timeout = sync_timeout
        self.mirror = ClusterMirror(api, kinds, self.retry, watch_timeout)
        self.pods = PodActions(api, self.retry, budget_attempts)
        self.writer = ObjectWriter(api, self.retry, scheduler_name)
        self._created: dict[str, float] = {}  # uid -> when this client created the pod
        self._created_lock = threading.Lock()

    # --- construction --------------------------------------------------------------------
    @classmethod
    def from_kubeconfig(
        cls, path: str, context: str | None = None, **options: Any
    ) -> KubeClusterClient:
        return cls(api_client(kubeconfig=path, context=context), **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeClusterClient:
        return cls(api_client(in_cluster=True), **options)

    @classmethod
    def from_url(
        cls, url: str, token: str | None = None, verify_ssl: bool = True, **options: Any
    ) -> KubeClusterClient:
        return cls(api_client(base_url=url, token=token, verify_ssl=verify_ssl), **options)

    def close(self) -> None:
        self.mirror.stop()
        self.api.close()

    def __enter__(self) -> KubeClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading -------------------------------------------------------------------------
    def is_ours(self, pod: Doc) -> bool:
        return bool((pod.get("spec") or {}).get("schedulerName") == self.scheduler_name)

    def _keeps(self, pod: Doc) -> bool:
        """Our pods, whatever their state, and every other pod that holds a node's resources."""
        if self.is_ours(pod):
            return True
        bound = bool((pod.get("spec") or {}).get("nodeName"))
        return bound and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES

    def snapshot(self, timeout: float | None = None, copied: bool = False) -> list[Doc]:
        """Every watched object as a manifest dict, kinds in WATCHED_KINDS order.

        The first call starts the list+watch threads and waits until each kind has been listed;
        later calls return the mirror's current state at once. The dicts are the mirror's own
        (read-only) unless `copied=True`.
        """
        self.mirror.start()
        missing = self.mirror.wait_synced(self.sync_timeout if timeout is None else timeout)
        if missing:
            errors = {name: repr(self.mirror.reflectors[name].last_error) for name in missing}
            raise KubeUnavailable(f"could not list {', '.join(missing)}: {errors}")
        documents: list[Doc] = []
        for name in self.mirror.reflectors:
            docs = self.mirror.documents(name, copied)
            if name == "pods":
                docs = [pod for pod in docs if self._keeps(pod)]
            documents.extend(docs)
        return documents

    def resource_versions(self) -> dict[str, str | None]:
        return {name: r.resource_version for name, r in self.mirror.reflectors.items()}

    # --- enacting ------------------------------------------------------------------------
    def bind(
        self,
        namespace: str,
        name: str,
        uid: str | None,
        node: str,
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> BindResult:
        return self.pods.bind(namespace, name, uid, node, annotations, labels)

    def evict(
        self, namespace: str, name: str, preemptor: str, uid: str | None = None
    ) -> EvictResult:
        return self.pods.evict(namespace, name, preemptor, uid)

    def nominate(self, namespace: str, name: str, node: str | None) -> bool:
        return self.pods.nominate(namespace, name, node)

    def enact(self, plan: EnactPlan) -> EnactReport:
        """Apply a round's plan: bindings, then evictions, then nominations, each idempotent.

        Outcomes are keyed by the plan's pod ids; the database is the caller's business.
        """
        report = EnactReport()
        for binding in plan.bindings:
            bound = self.bind(
                binding.namespace,
                binding.name,
                binding.uid or None,
                binding.node,
                binding.annotations,
                binding.labels,
            )
            if bound.ok:
                report.bound.append(binding.pod_id)
            else:
                report.dropped[binding.pod_id] = bound.message
        for eviction in plan.evictions:
            evicted = self.evict(
                eviction.namespace, eviction.name, eviction.preemptor, eviction.uid or None
            )
            if evicted.ok:
                report.evicted.append(eviction.pod_id)
            elif evicted.outcome is EvictOutcome.REPLACED:
                report.replaced[eviction.pod_id] = evicted.message
            else:
                report.blocked[eviction.pod_id] = evicted.message
        for nomination in plan.nominations:
            if self.nominate(nomination.namespace, nomination.name, nomination.node):
                report.nominated.append(nomination.pod_id)
        for deletion in plan.deletions:
            if self.pods.delete(deletion.namespace, deletion.name, deletion.uid or None):
                report.deleted.append(deletion.pod_id)
        return report

    def apply_object(self, doc: Doc) -> Doc:
        return self.writer.apply_object(doc)

    def create_job_pods(
        self, namespace: str, pods: Sequence[Doc], pod_group: Doc | None = None
    ) -> list[Doc]:
        created = self.writer.create_job_pods(namespace, pods, pod_group)
        now = time.monotonic()
        with self._created_lock:
            for doc in created:
                uid = (doc.get("metadata") or {}).get("uid")
                if uid:
                    self._created[uid] = now
        return created

    def unseen_created(self) -> set[str]:
        """UIDs of pods this client created that the mirror has not shown yet (at most
        UNSEEN_CREATED_SECONDS old): absent from the mirror does not mean gone for them."""
        seen = {(d.get("metadata") or {}).get("uid") for d in self.mirror.documents("pods")}
        horizon = time.monotonic() - UNSEEN_CREATED_SECONDS
        with self._created_lock:
            for uid in [u for u, t in self._created.items() if u in seen or t < horizon]:
                del self._created[uid]
            return set(self._created)
