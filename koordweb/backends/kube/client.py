"""`KubeClusterClient`: the kubernetes backend's wire layer, one object per cluster.

It reads the cluster as manifests (`snapshot()`: every watched kind, kept current by list+watch
threads) and enacts decisions (`bind`, `evict`, `nominate`, `apply_object`, `create_job_pods`).
It never touches the database: the caller turns documents into rows and outcomes into records.

Enacting runs bindings, then evictions, `parallelism` at a time (kube-scheduler binds in parallel
too), every request under one client budget (`qps`, `burst`: kube-scheduler's --kube-api-qps and
--kube-api-burst). `unseen()` says which pods the caller knows that the mirror cannot yet call
gone: absence from a watch that may be late is not deletion.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from kubernetes import client

from koordweb.backends.base import EnactPlan, EnactReport
from koordweb.backends.kube.connection import (
    KubeUnavailable,
    RetryPolicy,
    TokenBucket,
    api_client,
)
from koordweb.backends.kube.kinds import WATCHED_KINDS, WatchedKind
from koordweb.backends.kube.mirror import ClusterMirror
from koordweb.backends.kube.objects import ObjectWriter
from koordweb.backends.kube.pods import BindResult, EvictOutcome, EvictResult, PodActions
from scheduler.vocabulary import FINISHED_POD_PHASES

Doc = dict[str, Any]
T = TypeVar("T")
R = TypeVar("R")
# A created pod the watch has not delivered after this long is taken as gone.
UNSEEN_CREATED_SECONDS = 300.0
# A pod the caller knows and the mirror has not shown for this long: a fresh list settles it.
UNSEEN_PROOF_SECONDS = 5.0
# The defaults of kube-scheduler's --kube-api-qps and --kube-api-burst, and its parallelism.
API_QPS, API_BURST, BIND_PARALLELISM = 50.0, 100, 16


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
        qps: float = API_QPS,
        burst: int = API_BURST,
        parallelism: int = BIND_PARALLELISM,
    ) -> None:
        self.api = api
        self.scheduler_name = scheduler_name
        retry = retry or RetryPolicy()
        if retry.limiter is None:
            retry = dataclasses.replace(retry, limiter=TokenBucket(qps, burst))
        self.retry = retry
        self.parallelism = max(int(parallelism), 1)
        self.sync_timeout = sync_timeout
        self.mirror = ClusterMirror(api, kinds, self.retry, watch_timeout)
        self.pods = PodActions(api, self.retry, budget_attempts)
        self.writer = ObjectWriter(api, self.retry, scheduler_name)
        self._created: dict[str, float] = {}  # uid -> when this client created the pod
        self._created_lock = threading.Lock()
        self._noticed: dict[str, float] = {}  # uid -> since when the caller knows it, unseen
        self._proving: threading.Thread | None = None
        self._proved_at = float("-inf")
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    # --- construction --------------------------------------------------------------------
    @classmethod
    def from_kubeconfig(
        cls, path: str, context: str | None = None, **options: Any
    ) -> KubeClusterClient:
        return cls(
            api_client(kubeconfig=path, context=context, pool_maxsize=_pool_size(options)),
            **options,
        )

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeClusterClient:
        return cls(api_client(in_cluster=True, pool_maxsize=_pool_size(options)), **options)

    @classmethod
    def from_url(
        cls, url: str, token: str | None = None, verify_ssl: bool = True, **options: Any
    ) -> KubeClusterClient:
        connection = api_client(
            base_url=url, token=token, verify_ssl=verify_ssl, pool_maxsize=_pool_size(options)
        )
        return cls(connection, **options)

    def close(self) -> None:
        self.mirror.stop()
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
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
        return bound and (pod.get("status") or {}).get("phase") not in FINISHED_POD_PHASES

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
        pods = self.mirror.reflectors.get("pods")
        seen = pods.find(namespace, name) if pods is not None else None
        return self.pods.bind(namespace, name, uid, node, annotations, labels, seen)

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
        bindings = self._each(
            plan.bindings,
            lambda b: self.bind(
                b.namespace, b.name, b.uid or None, b.node, b.annotations, b.labels
            ),
        )
        for binding, bound in zip(plan.bindings, bindings, strict=True):
            if bound.ok:
                report.bound.append(binding.pod_id)
            else:
                report.dropped[binding.pod_id] = bound.message
        evictions = self._each(
            plan.evictions,
            lambda e: self.evict(e.namespace, e.name, e.preemptor, e.uid or None),
        )
        for eviction, evicted in zip(plan.evictions, evictions, strict=True):
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

    def _each(self, items: Sequence[T], action: Callable[[T], R]) -> list[R]:
        """`action` on every item, `parallelism` in flight, answers in the items' order. The
        first failure stops what has not started and is raised once the started ones end
        (each action is idempotent: the outbox enacts the rest again)."""
        if self.parallelism == 1 or len(items) < 2:
            return [action(item) for item in items]
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.parallelism, "kube-enact")
            pool = self._pool
        futures: list[Future[R]] = [pool.submit(action, item) for item in items]
        failure: BaseException | None = None
        for future in futures:
            if failure is not None:
                future.cancel()
                continue
            error = future.exception()
            if error is not None:
                failure = error
                for rest in futures:
                    rest.cancel()
        if failure is not None:
            for future in futures:
                if not future.cancelled():
                    future.exception()  # wait for the ones in flight
            raise failure
        return [future.result() for future in futures]

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

    def unseen(self, known: Iterable[str]) -> set[str]:
        """Of the pod UIDs the caller knows (its rows), those the mirror does not hold and cannot
        call gone: no DELETED event, no list since the caller first asked that lacked them (the
        watch may be late; another worker may have just created them). For one unseen longer
        than UNSEEN_PROOF_SECONDS a fresh list is started in the background (never in the
        caller's thread), and the next call knows. Pods this client created are included."""
        pods = self.mirror.reflectors.get("pods")
        if pods is None:
            return self.unseen_created()
        absent = set(known) - pods.uids()
        now = time.monotonic()
        with self._created_lock:
            self._noticed = {uid: self._noticed.get(uid, now) for uid in absent}
            unseen = {uid for uid, since in self._noticed.items() if not pods.gone(uid, since)}
            for uid in absent - unseen:
                del self._noticed[uid]
            overdue = any(now - self._noticed[uid] > UNSEEN_PROOF_SECONDS for uid in unseen)
            idle = self._proving is None or not self._proving.is_alive()
            if overdue and idle and now - self._proved_at > UNSEEN_PROOF_SECONDS:
                self._proved_at = now
                self._proving = threading.Thread(
                    target=self._prove, args=(pods,), name="kube-prove-absence", daemon=True
                )
                self._proving.start()
        return unseen | self.unseen_created()

    @staticmethod
    def _prove(pods: Any) -> None:
        try:
            pods.prove_absence()
        except Exception as error:  # the next call tries again
            pods.last_error = error

    def unseen_created(self) -> set[str]:
        """UIDs of pods this client created that the mirror has not shown yet (at most
        UNSEEN_CREATED_SECONDS old): absent from the mirror does not mean gone for them."""
        seen = {(d.get("metadata") or {}).get("uid") for d in self.mirror.documents("pods")}
        horizon = time.monotonic() - UNSEEN_CREATED_SECONDS
        with self._created_lock:
            for uid in [u for u, t in self._created.items() if u in seen or t < horizon]:
                del self._created[uid]
            return set(self._created)


def _pool_size(options: Mapping[str, Any]) -> int:
    """Connections to keep: one per binding in flight, one per watch, some to spare."""
    return int(options.get("parallelism", BIND_PARALLELISM)) + 48
