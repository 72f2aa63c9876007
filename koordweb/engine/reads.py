"""One engine state per cluster and change position, shared by every page that asks the engine.

Building the engine's state of a 1,000-node cluster (rows -> snapshot -> the Framework's
CycleState) takes most of a second, and the topology page, its API, a job's page, feasibility,
what-if and "what would help" each asked for one, some twice per request. Here it is built once
and kept (a small least-recently-used table in this process) until the cluster changes:

- A change is read from the rows themselves, as the warm snapshot reads it
  (`engine.warm.change_position`, migration 0008): an entry remembers the position taken just
  before its rows were read; any node, pod, job, node report or device of the cluster changed at
  or after it, or any tracked row deleted since (deletions do not say their cluster), and the
  next question rebuilds. Otherwise the entry is moved on to the current position, so the check
  stays a look at the few rows changed since.
- The small tables read whole every time (quotas, disruption budgets, topology layers, device
  templates, the cluster's plugin arguments) are compared by value; a cluster deleted and made
  again under the same id differs by its creation time.
- A state answers only within `MAX_AGE_SECONDS` of the time its snapshot was read at (the
  snapshot carries it): node reports expire with time alone (LoadAware).

`cluster_read(cluster)` gives the entry: `live()` (the cluster as a round sees it), `empty()`
(the same nodes with nothing on them, as the topology API and feasibility ask) and `snapshot`.
The states are only asked (offer slots, the tree, what bound pods hold), never changed, so one
entry serves every request and thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from koordweb.engine.assembly import build_for_round
from koordweb.engine.profile import engine_profile
from koordweb.engine.warm import DELETED_TABLE, change_position
from koordweb.models import Cluster, DeviceTemplateConfig
from koordweb.rows.changes import TRACKED
from scheduler.api import EngineState, IntArray, PodTemplate, Profile
from scheduler.model import ClusterSnapshot

# How long a state answers at most, in seconds, however quiet the cluster: node reports expire
# with time alone, and the pages refresh every few seconds.
MAX_AGE_SECONDS = 15.0
# Clusters kept: an entry of 1,000 nodes holds a snapshot and up to two engine states.
KEEP = 8  # two per cluster: the live read and the nodes-only one
# Templates whose offer slots an entry remembers (a page asks one to a few dozen).
KEEP_TEMPLATES = 256


@dataclass
class ClusterRead:
    """A cluster's engine state at one change position: the snapshot, its live state and its
    empty one (each built when first asked)."""

    cluster_id: int
    since: int  # a change of the cluster's rows at or after this position makes it stale
    tables: tuple[Any, ...]  # the small tables and the cluster row, by value
    snapshot: ClusterSnapshot
    profile: Profile
    nodes_only: bool = False  # read without pod or job rows: it answers for the empty cluster only
    _live: EngineState | None = None
    _empty: EngineState | None = None
    _slots: dict[tuple[Any, ...], IntArray] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def live(self) -> EngineState:
        """The cluster as the engine sees it in a round."""
        with self._lock:
            if self._live is None:
                self._live = EngineState(self.snapshot, self.profile)
            return self._live

    def empty(self) -> EngineState:
        """The same nodes with nothing bound, nominated or reported on them."""
        with self._lock:
            if self._empty is None:
                self._empty = EngineState(self.snapshot, self.profile, empty=True)
            return self._empty

    def offer_slots(self, template: PodTemplate, *, empty: bool = False) -> IntArray:
        """Per node (name order), how many pods of `template` the engine lets there, on the live
        or the empty state; remembered per template (read-only arrays)."""
        key = (
            empty,
            tuple(sorted(template.requests.items())),
            tuple(sorted(template.node_selector.items())),
            template.tolerations,
            template.priority,
        )
        found = self._slots.get(key)
        if found is None:
            state = self.empty() if empty else self.live()
            with self._lock:
                found = state.offer_slots(template)
                found.flags.writeable = False
                if len(self._slots) >= KEEP_TEMPLATES:
                    self._slots.clear()
                self._slots[key] = found
        return found


_entries: OrderedDict[tuple[int, bool], ClusterRead] = OrderedDict()
_lock = threading.Lock()
# Builds per cluster id in this process (tests and diagnostics: a cache hit builds nothing).
builds: dict[int, int] = {}


def cluster_read(cluster: Cluster, *, nodes_only: bool = False) -> ClusterRead:
    """The cluster's engine state: the kept one while nothing of the cluster changed, else
    read now (and kept). `nodes_only`: for questions about the empty cluster only (feasibility,
    never-fit checks): read without a pod or job row, and kept while no node, device or report
    changes, however many pods and jobs come and go (a tenant's parked jobs cost it nothing)."""
    position = change_position()  # before reading: a change made during the read is seen next
    tables = _small_tables(cluster)
    entry = _kept((cluster.id, nodes_only), tables, position)
    if entry is not None:
        return entry
    snapshot, _ = build_for_round(cluster, now=timezone.now(), nodes_only=nodes_only)
    entry = ClusterRead(
        cluster.id, position, tables, snapshot, engine_profile(cluster), nodes_only=nodes_only
    )
    key = (cluster.id, nodes_only)
    with _lock:
        _entries[key] = entry
        _entries.move_to_end(key)
        while len(_entries) > KEEP:
            _entries.popitem(last=False)
        builds[cluster.id] = builds.get(cluster.id, 0) + 1
    return entry


def cluster_read_kept(cluster: Cluster) -> ClusterRead | None:
    """The cluster's kept engine state if it still answers for the cluster now, else None
    (nothing is read or built: for a caller with a cheaper read of its own, such as what-if)."""
    position = change_position()
    return _kept((cluster.id, False), _small_tables(cluster), position)


def _kept(key: tuple[int, bool], tables: tuple[Any, ...], position: int) -> ClusterRead | None:
    """The entry kept under `key` if it still answers now (moved on to `position`), else None."""
    with _lock:
        entry = _entries.get(key)
    if entry is None or not _still(entry, tables, position):
        return None
    with _lock:
        entry.since = max(entry.since, position)
        if key in _entries:
            _entries.move_to_end(key)
    return entry


def reads_forget(cluster_id: int | None = None) -> None:
    """Drop the kept state of a cluster (None: of every cluster), and its count of builds."""
    with _lock:
        if cluster_id is None:
            _entries.clear()
            builds.clear()
        else:
            _entries.pop((cluster_id, False), None)
            _entries.pop((cluster_id, True), None)
            builds.pop(cluster_id, None)


def _still(entry: ClusterRead, tables: tuple[Any, ...], position: int) -> bool:
    """Whether the entry still answers for its cluster now."""
    if entry.tables != tables:
        return False
    if abs(timezone.now().timestamp() - entry.snapshot.now) > MAX_AGE_SECONDS:
        return False  # read too long ago (or the clock was set back)
    if position < entry.since:
        return False  # the position went back: another database, or a rollback
    return not _changed_since(entry.cluster_id, entry.since, nodes_only=entry.nodes_only)


def _changed_since(cluster_id: int, since: int, *, nodes_only: bool = False) -> bool:
    """Whether a row of the cluster (or any tracked row: deletions name no cluster) changed at or
    after `since`. Each question starts from the change position's index (the few rows changed
    since); a node's reports and devices are matched to the cluster after (the unary plus keeps
    SQLite from walking every report of every node of the cluster instead)."""
    read = TRACKED - {"koordweb_pod", "koordweb_job"} if nodes_only else TRACKED
    tracked = ", ".join(f"'{t}'" for t in sorted(read))
    of_cluster = "SELECT id FROM koordweb_node WHERE cluster_id = %s"
    questions = [
        (f"table_name IN ({tracked})", DELETED_TABLE, []),
        ("cluster_id = %s", "koordweb_node", [cluster_id]),
        *(
            []
            if nodes_only
            else [
                ("cluster_id = %s", "koordweb_pod", [cluster_id]),
                ("cluster_id = %s", "koordweb_job", [cluster_id]),
            ]
        ),
        (f"+node_id IN ({of_cluster})", "koordweb_nodemetric", [cluster_id]),
        (f"+node_id IN ({of_cluster})", "koordweb_device", [cluster_id]),
    ]
    with connection.cursor() as cursor:
        for where, table, params in questions:
            cursor.execute(
                f"SELECT 1 FROM {table} WHERE change_seq >= %s AND {where} LIMIT 1",
                [since, *params],
            )
            if cursor.fetchone() is not None:
                return True
    return False


def _small_tables(cluster: Cluster) -> tuple[Any, ...]:
    """What a snapshot reads whole every time and the profile is made of, by value."""
    plugins = repr(settings.KOORDWEB_SCHEDULER_PLUGINS)
    fresh = Cluster.objects.filter(pk=cluster.pk).values_list("created_at", "scheduler_args")
    return (
        plugins,
        tuple(fresh),
        tuple(cluster.quotas.order_by("id").values_list()),
        tuple(cluster.pdbs.order_by("id").values_list()),
        tuple(cluster.topology_layers.order_by("id").values_list()),
        tuple(
            DeviceTemplateConfig.objects.filter(cluster_id=cluster.pk)
            .order_by("id")
            .values_list("id", "name", "data")
        ),
    )
