"""The warm snapshot: each cluster's rows kept in the worker between rounds, updated from what
changed since the last round, and turned into the engine's snapshot by the same `assemble` step as
a cold build, so the engine sees the same input either way.

What changed is read from the rows themselves: every row a snapshot reads (nodes, pods, jobs, node
metrics, devices) carries a change position kept by the database (migration 0008: a trigger on
every insert and update; deletions leave a row in `koordweb_deleted_row`). Every writer moves it:
the simulated backend's kubelet, the kubernetes backend's reconcile of its watch mirror (watch
events, UID changes, DELETED pods), the API's submissions and cancellations, the outbox's enact
records. A round reads "changed at or after position P" (P taken before its previous read: on
PostgreSQL the oldest transaction still running then, so one committing late is read next time).

A cluster's state is built cold (every row) on its first round in this process (a worker
restart), when its position or format does not match (another database, a cluster deleted and
made again under the same id, the device templates changed), when it is older than
KOORDWEB_WARM_MAX_AGE_SECONDS, after a failed round (its transaction rolled back what was read),
and every KOORDWEB_WARM_CHECK_ROUNDS rounds, when a cold build is compared with the warm state: a
difference is a bug, logged and reported in the round's metrics (`warm_mismatch`), and the cold
snapshot is used.

API (the round calls these): `warm_snapshot(cluster, now=...)` -> (snapshot, index, report);
`warm_forget(cluster_id)` (None: every cluster); `warm_index(cluster_id, snapshot)`: the last
assembly's reverse maps (the back-off names the job rows it holds with them).
"""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import BigIntegerField, Max
from django.db.models.expressions import RawSQL

from koordweb.engine import assembly, cluster_rows
from koordweb.engine import snapshot as snap
from koordweb.engine.profile import node_devices_builder
from koordweb.models import Cluster, DeviceTemplateConfig, Job, Node, NodeMetric, Pod
from koordweb.rows.read import rows_read
from scheduler.api import Profile, RoundResult
from scheduler.model import ClusterSnapshot
from scheduler.vocabulary import FINISHED_POD_PHASES

logger = logging.getLogger("koordweb.warm")

FORMAT = 1  # bump when what a state holds changes: states of another format are rebuilt cold
DELETED_TABLE = "koordweb_deleted_row"


class WarmMismatch(RuntimeError):
    """The warm state differed from a cold build (raised only with KOORDWEB_WARM_CHECK_STRICT)."""


@dataclass
class WarmReport:
    """How a round's snapshot was made: `cold` (and why), `warm` (rows changed), `checked`."""

    mode: str
    reason: str = ""
    changed_rows: int = 0
    mismatch: str = ""
    engine_reused: bool = False  # an idle, unchanged cluster: the last round's answer again

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"snapshot": self.mode, "snapshot_changed_rows": self.changed_rows}
        if self.engine_reused:
            out["engine_reused"] = 1
        if self.reason:
            out["snapshot_cold_reason"] = self.reason
        if self.mismatch:
            out["warm_mismatch"] = self.mismatch
        return out


@dataclass
class WarmState:
    cluster_id: int
    cluster_created: datetime
    since: int  # the next read takes rows whose change position is at or after this
    templates: Any  # the device template rows the nodes' device states were built with
    rows: cluster_rows.ClusterRows
    cache: assembly.AssemblyCache = field(default_factory=assembly.AssemblyCache)
    rounds: int = 0  # rounds since the last cold build or check
    refreshed: float = field(default_factory=time.monotonic)
    format: int = FORMAT
    last: tuple[ClusterSnapshot, snap.SnapshotIndex] | None = None  # the last assembly
    # The last round's engine input and answer, kept while the cluster has no pending pod.
    idle: tuple[ClusterSnapshot, str, RoundResult] | None = None
    # The engine plugins' memory across rounds (ClusterSnapshot.engine_cache): answers keyed by
    # the content they depend on, so a round decides the same with it or without it.
    engine_cache: dict[str, Any] = field(default_factory=dict)


_states: dict[int, WarmState] = {}
_lock = threading.Lock()


def warm_engine(
    cluster: Cluster,
    snapshot: ClusterSnapshot,
    profile: Profile,
    run: Callable[[ClusterSnapshot, Profile], RoundResult],
) -> tuple[RoundResult, bool]:
    """The engine's answer for a warm snapshot: an idle cluster (no pending pod: nothing to
    place, so no preemptor and no waiting gang) whose snapshot equals the last round's but for
    the clock gets the last answer again (True) instead of a new run; otherwise `run`, given the
    plugins' memory kept from the cluster's earlier rounds."""
    state = _states.get(cluster.id)
    args = json.dumps(cluster.scheduler_args or {}, sort_keys=True)
    idle = all(pod.node is not None or pod.terminating for pod in snapshot.pods)
    if state is not None and state.idle is not None and idle:
        before, before_args, result = state.idle
        if before_args == args and replace(snapshot, now=before.now) == before:
            return result, True
    warm_input = snapshot if state is None else replace(snapshot, engine_cache=state.engine_cache)
    result = run(warm_input, profile)
    if state is not None:
        state.idle = (snapshot, args, result) if idle else None
    return result, False


def warm_heap_settle(mode: str) -> None:
    """After a round: the objects alive now (warm states above all) move out of the garbage
    collector's reach (`gc.freeze`), so its full collections during the next rounds scan only
    what those rounds make instead of the whole warm heap (at 5,000 nodes they cost about 100 ms
    a round). After a cold build or a check (`mode` other than "warm") everything is unfrozen
    and collected first, so cycles among states dropped since then are reclaimed."""
    if mode != "warm":
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def warm_forget(cluster_id: int | None = None) -> None:
    """Drop a cluster's warm state (None: every cluster's): its next round builds cold."""
    with _lock:
        if cluster_id is None:
            _states.clear()
        else:
            _states.pop(cluster_id, None)


def warm_index(cluster_id: int, snapshot: ClusterSnapshot) -> snap.SnapshotIndex | None:
    """The reverse maps of the cluster's last assembly when `snapshot` was made from it (its
    pods the very same tuple, as the back-off's view of it keeps them); None otherwise."""
    state = _states.get(cluster_id)
    if state is None or state.last is None or state.last[0].pods is not snapshot.pods:
        return None
    return state.last[1]


def warm_state(cluster_id: int) -> WarmState | None:
    """The state kept for a cluster (tests and diagnostics)."""
    return _states.get(cluster_id)


def change_position() -> int:
    """Where the next read of changed rows starts (taken before reading).

    PostgreSQL: the oldest transaction still running (ours included): every change not visible
    now is made by it or a later one. SQLite: one writer at a time, a counter: the next value."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT LEAST(pg_snapshot_xmin(pg_current_snapshot())::text::bigint, "
                "COALESCE(pg_current_xact_id_if_assigned()::text::bigint, "
                "9223372036854775807))"
            )
        else:
            cursor.execute("SELECT value + 1 FROM koordweb_change_counter WHERE id = 1")
        return int(cursor.fetchone()[0])


def warm_snapshot(
    cluster: Cluster, *, now: datetime
) -> tuple[ClusterSnapshot, snap.SnapshotIndex, WarmReport]:
    """The cluster's snapshot for a round, from its warm state (built cold when it must be).

    Call inside the round's transaction, after the backend's sync."""
    devices_for = node_devices_builder(cluster)
    templates = _templates(cluster.id)
    with _lock:
        state = _states.get(cluster.id)
        reason = _why_cold(state, cluster, templates)
        if state is None or reason:
            state = _cold_state(cluster, templates)
            _states[cluster.id] = state
            snapshot, index = assembly.assemble(
                cluster, state.rows, now=now, devices_for=devices_for, cache=state.cache
            )
            state.last = (snapshot, index)
            return snapshot, index, WarmReport("cold", reason=reason or "first round")
        quotas = state.rows.quota_names
        changed = _refresh(state)
        state.rounds += 1
        state.refreshed = time.monotonic()
        if changed == 0 and state.last is not None and quotas == state.rows.quota_names:
            # Nothing changed: the same engine objects (the small tables are read again).
            before, index = state.last
            snapshot = snap.snapshot_of(cluster, before.nodes, before.pods, before.jobs, now=now)
        else:
            snapshot, index = assembly.assemble(
                cluster, state.rows, now=now, devices_for=devices_for, cache=state.cache
            )
        state.last = (snapshot, index)
        every = int(settings.KOORDWEB_WARM_CHECK_ROUNDS)
        if every <= 0 or state.rounds < every:
            return snapshot, index, WarmReport("warm", changed_rows=changed)
        return _check(cluster, state, snapshot, index, now, devices_for, templates, changed)


def _check(
    cluster: Cluster,
    state: WarmState,
    snapshot: ClusterSnapshot,
    index: snap.SnapshotIndex,
    now: datetime,
    devices_for: Any,
    templates: Any,
    changed: int,
) -> tuple[ClusterSnapshot, snap.SnapshotIndex, WarmReport]:
    """The periodic check: a cold build compared with the warm one; a difference is a bug."""
    cold = _cold_state(cluster, templates)
    cold_snapshot, cold_index = assembly.assemble(
        cluster, cold.rows, now=now, devices_for=devices_for, cache=cold.cache
    )
    cold.last = (cold_snapshot, cold_index)
    _states[cluster.id] = cold
    if cold_snapshot == snapshot and _same_rows(state.rows, cold.rows):
        # Equal: the cold build is handed out, the one the state now keeps (`warm_index`).
        return cold_snapshot, cold_index, WarmReport("checked", changed_rows=changed)
    text = warm_difference(state.rows, cold.rows, snapshot, cold_snapshot)
    logger.error("warm snapshot of cluster %s differs from a cold build: %s", cluster.name, text)
    if settings.KOORDWEB_WARM_CHECK_STRICT:
        raise WarmMismatch(f"warm snapshot of cluster {cluster.name} differs: {text}")
    return cold_snapshot, cold_index, WarmReport("checked", changed_rows=changed, mismatch=text)


def _same_rows(a: cluster_rows.ClusterRows, b: cluster_rows.ClusterRows) -> bool:
    return (
        a.nodes == b.nodes
        and a.pods == b.pods
        and a.jobs == b.jobs
        and a.metrics == b.metrics
        and a.devices == b.devices
        and a.quota_names == b.quota_names
    )


def warm_difference(
    warm: cluster_rows.ClusterRows,
    cold: cluster_rows.ClusterRows,
    warm_snapshot: ClusterSnapshot,
    cold_snapshot: ClusterSnapshot,
) -> str:
    """Where two states differ, in a few words: the rows by table and id, or the engine objects."""
    parts: list[str] = []
    for name in ("nodes", "pods", "jobs", "metrics", "devices", "quota_names"):
        a, b = getattr(warm, name), getattr(cold, name)
        ids = sorted(
            (k for k in set(a) | set(b) if a.get(k) != b.get(k)), key=lambda k: (str(type(k)), k)
        )
        if ids:
            parts.append(f"{name} {ids[:10]}{' ...' if len(ids) > 10 else ''}")
    for name in ("nodes", "pods", "jobs", "quotas", "pdbs", "topology"):
        if getattr(warm_snapshot, name) != getattr(cold_snapshot, name):
            parts.append(f"snapshot.{name}")
    return "; ".join(parts) or "the snapshots differ"


def _templates(cluster_id: int) -> Any:
    return tuple(
        DeviceTemplateConfig.objects.filter(cluster_id=cluster_id)
        .order_by("id")
        .values_list("id", "name", "data")
    )


def _why_cold(state: WarmState | None, cluster: Cluster, templates: Any) -> str:
    if state is None:
        return "first round in this process"
    if state.format != FORMAT:
        return "state format changed"
    if state.cluster_created != cluster.created_at:
        return "another cluster under the same id"
    if state.templates != templates:
        return "device templates changed"
    if time.monotonic() - state.refreshed > float(settings.KOORDWEB_WARM_MAX_AGE_SECONDS):
        return "state older than KOORDWEB_WARM_MAX_AGE_SECONDS"
    if change_position() < state.since:
        return "change position behind the state's (another database, or a rollback)"
    return ""


def _cold_state(cluster: Cluster, templates: Any) -> WarmState:
    since = change_position()
    rows = cluster_rows.read_rows(cluster.id, devices=True)
    return WarmState(cluster.id, cluster.created_at, since, templates, rows)


def _changed(queryset: Any, table: str, since: int) -> Any:
    seq = RawSQL(f'"{table}"."change_seq"', (), output_field=BigIntegerField())
    return queryset.alias(change_seq=seq).filter(change_seq__gte=since).order_by()


def _changed_rows(
    model: Any, fields: tuple[str, ...], row: Any, cluster_id: int, since: int
) -> Any:
    """The cluster's rows of `model` (nodes, pods or jobs) changed since `since`, as `row`s."""
    changed = _changed(model.objects.filter(cluster_id=cluster_id), model._meta.db_table, since)
    return rows_read(changed.values_list(*fields), row._make)


def _refresh(state: WarmState) -> int:
    """Apply the rows changed since the state's position; returns how many were read."""
    since = change_position()
    rows, cid, start = state.rows, state.cluster_id, state.since
    deleted: dict[str, set[int]] = defaultdict(set)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT table_name, row_id FROM {DELETED_TABLE} WHERE change_seq >= %s", [start]
        )
        for table, row_id in cursor.fetchall():
            deleted[table].add(int(row_id))
    count = sum(len(ids) for ids in deleted.values())

    for node in _changed_rows(Node, cluster_rows.NODE_FIELDS, cluster_rows.NodeRow, cid, start):
        _keep(rows.nodes, node.id, node)
        count += 1
    for node_id in deleted["koordweb_node"]:
        rows.nodes.pop(node_id, None)
        rows.metrics.pop(node_id, None)
        rows.devices.pop(node_id, None)

    for pod in _changed_rows(Pod, cluster_rows.POD_FIELDS, cluster_rows.PodRow, cid, start):
        count += 1
        if pod.phase in FINISHED_POD_PHASES:
            rows.pods.pop(pod.id, None)
        else:
            _keep(rows.pods, pod.id, pod)
    for pod_id in deleted["koordweb_pod"]:
        rows.pods.pop(pod_id, None)

    for job in _changed_rows(Job, cluster_rows.JOB_FIELDS, cluster_rows.JobRow, cid, start):
        _keep(rows.jobs, job.id, job)
        count += 1
    for job_id in deleted["koordweb_job"]:
        rows.jobs.pop(job_id, None)
    referenced = {pod.job_id for pod in rows.pods.values()}
    missing = referenced - rows.jobs.keys()
    if missing:
        for r in (
            Job.objects.filter(id__any=list(missing))
            .order_by()
            .values_list(*cluster_rows.JOB_FIELDS)
        ):
            rows.jobs[r[0]] = cluster_rows.JobRow(*r)
    rows.jobs = {
        job_id: job
        for job_id, job in rows.jobs.items()
        if cluster_rows.needed_job(job, job_id in referenced)
    }

    count += _refresh_metrics(rows, cid, start, deleted["koordweb_nodemetric"])
    count += _refresh_devices(rows, cid, start, deleted["koordweb_device"])
    rows.quota_names = cluster_rows.quota_names(cid, rows.jobs.values())
    state.since = since
    _prune_deleted()
    return count


def _keep(rows: dict[Any, Any], key: Any, row: Any) -> None:
    """Store a row read again, unless it equals the one kept: a row read twice (the previous
    round's own writes come back once more) keeps its object, so the assembly reuses the engine
    objects made from it."""
    if rows.get(key) != row:
        rows[key] = row


def _refresh_metrics(
    rows: cluster_rows.ClusterRows, cid: int, start: int, deleted: set[int]
) -> int:
    count = 0
    metrics = _changed(
        NodeMetric.objects.filter(node__cluster_id=cid), "koordweb_nodemetric", start
    )
    for r in metrics.values_list(*cluster_rows.METRIC_FIELDS):
        count += 1
        metric = cluster_rows.MetricRow(*r)
        current = rows.metrics.get(metric.node_id)
        if current is None or metric.id >= current.id:
            rows.metrics[metric.node_id] = metric
    lost = [node_id for node_id, m in rows.metrics.items() if m.id in deleted] if deleted else []
    if lost:
        for node_id in lost:
            rows.metrics.pop(node_id, None)
        latest = (
            NodeMetric.objects.filter(node_id__in=lost)
            .values("node_id")
            .annotate(latest=Max("id"))
            .values("latest")
        )
        for r in NodeMetric.objects.filter(id__in=latest).values_list(*cluster_rows.METRIC_FIELDS):
            rows.metrics[r[1]] = cluster_rows.MetricRow(*r)
    return count


def _refresh_devices(
    rows: cluster_rows.ClusterRows, cid: int, start: int, deleted: set[int]
) -> int:
    from koordweb.models import Device

    changed = set(
        _changed(Device.objects.filter(node__cluster_id=cid), "koordweb_device", start)
        .values_list("node_id", flat=True)
        .distinct()
    )
    if deleted:
        changed |= {
            node_id
            for node_id, devices in rows.devices.items()
            if any(d.id in deleted for d in devices)
        }
    if not changed:
        return 0
    found = cluster_rows.devices_of(node_id__in=list(changed))
    for node_id in changed:
        if node_id in found:
            rows.devices[node_id] = found[node_id]
        else:
            rows.devices.pop(node_id, None)
    return len(changed)


_prunes = 0


def _prune_deleted() -> None:
    """Forget deletions older than any warm state may be (every 100 refreshes)."""
    global _prunes
    _prunes += 1
    if _prunes % 100:
        return
    horizon = int(time.time() - 2 * float(settings.KOORDWEB_WARM_MAX_AGE_SECONDS) - 60)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {DELETED_TABLE} WHERE deleted_epoch < %s", [horizon])
