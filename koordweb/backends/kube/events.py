"""What kubectl shows of koordweb's pods: Events, the PodScheduled condition, PodGroup status.

Events are written as client-go's record.EventRecorder writes them (core/v1, the API kubectl
describe lists them from), through its EventCorrelator's two rules (tools/record/
events_cache.go): a spam filter, a token bucket per involved object (25 at once, then one per
5 minutes), whose refusals are dropped; and the logger, by which the same reason and message
on the same object again becomes one Event with a higher count and a later lastTimestamp (a
PATCH), not a new Event. As kube-scheduler retries an unschedulable pod at most every few
minutes rather than every round, a repeated observation is also counted here and written at
most once per `refresh` seconds. Events are best effort, as in Kubernetes: a write the API
server refuses is logged and dropped, never failing the round.

The PodScheduled condition is patched only when it changes, as kube-scheduler's
updatePod does (compared with the pod as the watch shows it).

PodGroup status follows Koordinator's PodGroup controller (pkg/scheduler/plugins/coscheduling/
controller/podgroup.go): "" -> Pending; Pending -> PreScheduling once the group has minMember
pods; then Scheduling / Scheduled by bound pods, Running once running and succeeded pods reach
minMember, Failed, Finished; the counts `scheduled`, `running`, `succeeded`, `failed`. It is written
through the PodGroup itself (the CRD has no status subresource): Koordinator merge-patches it,
koordweb replaces the version the watch shows (the verb its RBAC role grants), and a conflict
waits for the next round.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from koordweb.backends.base import PodNote
from koordweb.backends.kube.connection import KubeUnavailable, RetryPolicy
from scheduler.vocabulary import GANG_NAME, POD_GROUP_LABELS

log = logging.getLogger(__name__)
Doc = dict[str, Any]
COMPONENT = "koordweb"
MESSAGE_MAX = 1024  # kube-apiserver's NoteLengthLimit
REASON_MAX = 128
CONDITION_MESSAGE_MAX = 32 * 1024  # a condition's message has no API limit: ours is bounded
BURST = 25  # client-go's defaultSpamBurst
REFILL_SECONDS = 300.0  # client-go's defaultSpamQPS, 1/300
CACHE_ENTRIES = 4096  # client-go's maxLruCacheEntries
POD_SCHEDULED = "PodScheduled"


@dataclass(frozen=True)
class ObjectRef:
    """An Event's involved (or related) object."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str = "v1"

    def as_doc(self) -> Doc:
        doc = {"kind": self.kind, "namespace": self.namespace, "name": self.name}
        doc["apiVersion"] = self.api_version
        if self.uid:
            doc["uid"] = self.uid
        return doc


@dataclass
class _Series:
    """One Event as written: its name, the count written and observed, when it was written."""

    name: str
    first: str
    written_count: int
    count: int
    written_at: float


@dataclass
class _Bucket:
    tokens: float
    at: float


class EventRecorder:
    """Writes Events for one cluster; safe to share between threads."""

    def __init__(
        self,
        api_client: client.ApiClient,
        retry: RetryPolicy,
        *,
        refresh: float = 60.0,
        clock: Callable[[], float] = time.time,
        instance: str | None = None,
    ) -> None:
        self.core: Any = client.CoreV1Api(api_client)
        self.retry = retry
        self.refresh = refresh
        self.clock = clock
        self.instance = (instance or f"{COMPONENT}-{socket.gethostname()}")[:128]
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def record(
        self,
        regarding: ObjectRef,
        *,
        warning: bool,
        reason: str,
        action: str,
        message: str,
        related: ObjectRef | None = None,
    ) -> bool:
        """Record one observation; True when it was written to the API server."""
        kind = "Warning" if warning else "Normal"
        message = message[:MESSAGE_MAX]
        key = (*_object_key(regarding), kind, reason[:REASON_MAX], message)
        now = self.clock()
        with self._lock:
            series = self._series.get(key)
            if series is not None:
                series.count += 1
                self._series.move_to_end(key)
                if now - series.written_at < self.refresh or not self._take(regarding, now):
                    return False
            elif not self._take(regarding, now):
                return False
        try:
            if series is not None and self._patch(regarding, series, message, now):
                return True
            return self._create(key, regarding, kind, reason, action, message, related, now)
        except (ApiException, KubeUnavailable) as error:
            log.warning(
                "event %s on %s/%s dropped: %s", reason, regarding.namespace, regarding.name, error
            )
            return False

    def _take(self, regarding: ObjectRef, now: float) -> bool:
        """client-go's spam filter: a token bucket per involved object."""
        key = _object_key(regarding)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(BURST), now)
            if len(self._buckets) > CACHE_ENTRIES:
                self._buckets.popitem(last=False)
        bucket.tokens = min(float(BURST), bucket.tokens + (now - bucket.at) / REFILL_SECONDS)
        bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _create(
        self,
        key: tuple[str, ...],
        regarding: ObjectRef,
        kind: str,
        reason: str,
        action: str,
        message: str,
        related: ObjectRef | None,
        now: float,
    ) -> bool:
        stamp = _timestamp(now)
        name = f"{regarding.name}.{time.time_ns():x}"
        body: Doc = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": regarding.namespace},
            "involvedObject": regarding.as_doc(),
            "reason": reason[:REASON_MAX],
            "message": message,
            "type": kind,
            "action": action[:128],
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
        }
        if related is not None:
            body["related"] = related.as_doc()
        self.retry.call(
            f"create event {name}",
            lambda: self.core.create_namespaced_event(
                regarding.namespace, body, _preload_content=False
            ),
        )
        with self._lock:
            self._series[key] = _Series(name, stamp, 1, 1, now)
            if len(self._series) > CACHE_ENTRIES:
                self._series.popitem(last=False)
        return True

    def _patch(self, regarding: ObjectRef, series: _Series, message: str, now: float) -> bool:
        """The same Event again: its count and lastTimestamp (False when it expired: 404)."""
        body = {"count": series.count, "lastTimestamp": _timestamp(now), "message": message}
        try:
            self.retry.call(
                f"patch event {series.name}",
                lambda: self.core.patch_namespaced_event(
                    series.name, regarding.namespace, body, _preload_content=False
                ),
            )
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        with self._lock:
            series.written_count, series.written_at = series.count, now
        return True


def _object_key(ref: ObjectRef) -> tuple[str, str, str, str]:
    return (ref.kind, ref.namespace, ref.name, ref.uid)


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduled_condition(status: str, reason: str, message: str, now: float) -> Doc:
    return {
        "type": POD_SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message[:CONDITION_MESSAGE_MAX],
        "lastProbeTime": None,
        "lastTransitionTime": _timestamp(now),
    }


def condition_changes(pod: Mapping[str, Any] | None, condition: Mapping[str, Any]) -> bool:
    """Whether the pod (as the watch shows it) lacks this PodScheduled condition."""
    if pod is None:
        return True
    for found in (pod.get("status") or {}).get("conditions") or []:
        if found.get("type") == condition["type"]:
            return any(found.get(k) != condition[k] for k in ("status", "reason", "message"))
    return True


# --- PodGroup status ------------------------------------------------------------------------


def pod_group_status(
    previous: Mapping[str, Any], min_member: int, pods: Iterable[Doc], now: float
) -> Doc:
    """The status Koordinator's PodGroup controller would settle on, applying its steps until
    they change nothing (it requeues the group after each of its own writes)."""
    members = list(pods)
    status = dict(previous)
    for _ in range(4):
        step = _pod_group_step(status, min_member, members, _timestamp(now))
        if step == status:
            break
        status = step
    return status


def _pod_group_step(status: Mapping[str, Any], min_member: int, pods: list[Doc], stamp: str) -> Doc:
    phase = status.get("phase") or ""
    out = dict(status)
    if phase == "":
        out["phase"] = "Pending"
        return out
    if phase == "Pending":
        if min_member > 0 and len(pods) >= min_member:
            out["phase"] = "PreScheduling"
        return out
    if not pods:
        out["phase"] = "Pending"
        return out
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    running, succeeded = phases.count("Running"), phases.count("Succeeded")
    failed = phases.count("Failed")
    scheduled = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
    out.update(running=running, succeeded=succeeded, failed=failed, scheduled=scheduled)
    out["phase"] = "Scheduling" if scheduled < min_member else "Scheduled"
    if out["phase"] == "Scheduling" and not out.get("scheduleStartTime"):
        out["scheduleStartTime"] = stamp
    if out["phase"] == "Scheduled" and running + succeeded >= min_member:
        out["phase"] = "Running"
    if failed and failed + running + succeeded >= min_member:
        out["phase"] = "Failed"
    if succeeded >= min_member:
        out["phase"] = "Finished"
    return out


# --- telling a round's story -----------------------------------------------------------------


class StoryTeller:
    """Writes a round's `PodNote`s (Events, PodScheduled conditions) and the PodGroups' status
    for one cluster; keeps the Event correlator's memory between rounds."""

    def __init__(self, api_client: client.ApiClient, retry: RetryPolicy, writer: Any) -> None:
        self.core: Any = client.CoreV1Api(api_client)
        self.retry = retry
        self.writer = writer
        self.recorder = EventRecorder(api_client, retry)

    def tell(
        self,
        notes: Iterable[PodNote],
        pods: Mapping[tuple[str, str], Doc],
        groups: Iterable[Doc],
        scheduler_name: str,
        now: float,
    ) -> int:
        """Returns how many writes reached the API server."""
        writes = 0
        for note in notes:
            pod = pods.get((note.namespace, note.name))
            if note.condition and self._condition(note, pod, now):
                writes += 1
            regarding = ObjectRef("Pod", note.namespace, note.name, note.uid)
            related = ObjectRef("Pod", *note.related) if note.related else None
            if self.recorder.record(
                regarding,
                warning=note.warning,
                reason=note.reason,
                action=note.action,
                message=note.message,
                related=related,
            ):
                writes += 1
        return writes + self._pod_groups(pods.values(), groups, scheduler_name, now)

    def _condition(self, note: PodNote, pod: Mapping[str, Any] | None, now: float) -> bool:
        condition = scheduled_condition("False", note.condition, note.message, now)
        if not condition_changes(pod, condition):
            return False
        body: Doc = {"status": {"conditions": [condition]}}
        if note.uid:
            body["metadata"] = {"uid": note.uid}  # the pod decided about, not a namesake
        try:
            self.retry.call(
                f"condition of {note.namespace}/{note.name}",
                lambda: self.core.patch_namespaced_pod_status(
                    note.name, note.namespace, body, _preload_content=False
                ),
            )
        except (ApiException, KubeUnavailable) as error:
            log.warning("PodScheduled of %s/%s not written: %s", note.namespace, note.name, error)
            return False
        return True

    def _pod_groups(
        self, pods: Iterable[Doc], groups: Iterable[Doc], scheduler_name: str, now: float
    ) -> int:
        members: dict[tuple[str, str], list[Doc]] = {}
        ours: set[tuple[str, str]] = set()
        for pod in pods:
            metadata = pod.get("metadata") or {}
            group = _group_of(metadata)
            if group:
                key = (metadata.get("namespace") or "", group)
                members.setdefault(key, []).append(pod)
                if (pod.get("spec") or {}).get("schedulerName") == scheduler_name:
                    ours.add(key)
        writes = 0
        for doc in groups:
            metadata = doc.get("metadata") or {}
            key = (metadata.get("namespace") or "", metadata.get("name") or "")
            if key not in ours:
                continue  # another scheduler's group: its controller's business
            previous = doc.get("status") or {}
            minimum = _int((doc.get("spec") or {}).get("minMember"))
            status = pod_group_status(previous, minimum, members.get(key, []), now)
            if status == previous:
                continue
            try:
                self.writer.replace_status({"kind": "PodGroup", **doc}, status)
            except (ApiException, KubeUnavailable) as error:
                log.warning("status of PodGroup %s/%s not written: %s", *key, error)
                continue
            writes += 1
        return writes


def _group_of(metadata: Mapping[str, Any]) -> str:
    """The gang a pod belongs to, as Koordinator's GetGangNameByPod reads it."""
    labels = metadata.get("labels") or {}
    for label in POD_GROUP_LABELS:
        if labels.get(label):
            return str(labels[label])
    return str((metadata.get("annotations") or {}).get(GANG_NAME) or "")


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0
