"""Assembling the engine's snapshot from a cluster's rows, in proportion to what changed.

`assemble` turns `snapshot.ClusterRows` into a `scheduler.ClusterSnapshot` and the reverse maps a
round needs (`snapshot.SnapshotIndex`). With an `AssemblyCache` (the warm snapshot keeps one per
cluster between rounds) it makes again only what rows changed since the last assembly, by row
identity: the node tuple when a node, metric or device row changed; the blocks of the engine jobs
whose job or pod rows changed. The result equals a fresh assembly's either way.

`build_for_round` is the cold read: the rows read whole (`snapshot.read_rows`) and assembled
without a cache, with each node's device state (`profile.node_devices_builder`); the warm
snapshot (`warm.py`) reads only the changes and assembles with its cache.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain, compress
from operator import attrgetter, is_, is_not
from typing import Any, NamedTuple

from koordweb.engine.cluster_rows import (
    ClusterRows,
    DeviceRow,
    JobRow,
    MetricRow,
    NodeRow,
    PodRow,
    read_rows,
)
from koordweb.engine.profile import node_devices_builder
from koordweb.engine.snapshot import (
    PodCopier,
    SnapshotIndex,
    engine_job_id,
    engine_job_info,
    node_info,
    pod_copier,
    pod_info,
    snapshot_of,
)
from koordweb.engine.specs import parse_topology_rule
from koordweb.models import Cluster, Job, JobState
from scheduler.model import ClusterSnapshot, JobInfo, NodeInfo, PodInfo, TopologyRule
from scheduler.vocabulary import FINISHED_POD_PHASES


class PodMade(NamedTuple):
    """A pod's engine object and everything it was made from: reused while all of it holds."""

    row: PodRow
    job_id: str
    quota: str | None
    gang: str | None
    node: str | None
    nominated: str | None
    info: PodInfo


@dataclass(frozen=True)
class JobBlock:
    """One engine job's share of an assembly: its job rows (by id), their pods (each job's in
    (namespace, name) order) and the engine objects made from them."""

    engine_id: str
    members: tuple[JobRow, ...]
    quotas: tuple[str | None, ...]  # each member's quota name
    made: tuple[PodMade, ...]
    pods: tuple[PodRow, ...]
    pod_infos: tuple[PodInfo, ...]
    keys: tuple[str, ...]
    job_info: JobInfo


@dataclass
class NodePart:
    """The node half of the last assembly and the row mappings it was made from (shallow copies:
    the warm state updates its own in place)."""

    nodes: dict[int, NodeRow] = field(default_factory=dict)
    metrics: dict[int, MetricRow] = field(default_factory=dict)
    devices: dict[int, tuple[DeviceRow, ...]] | None = None  # None: assembled without devices
    infos: tuple[NodeInfo, ...] = ()
    names: dict[int, str] = field(default_factory=dict)  # node id -> name, in name order
    made: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # id -> (rows..., info)


@dataclass
class JobPart:
    """The pod and job half of the last assembly, one block per engine job, and what finding the
    blocks to make again needs: the rows it was made from (shallow copies), every pod row by job
    (whatever its phase or its job's), the pods each job in the snapshot holds, and which block
    each job is in."""

    pods: dict[int, PodRow] = field(default_factory=dict)
    jobs: dict[int, JobRow] = field(default_factory=dict)
    quota_names: dict[int, str] = field(default_factory=dict)
    node_names: dict[int, str] = field(default_factory=dict)
    pods_of_job: dict[int, dict[int, PodRow]] = field(default_factory=dict)
    held: dict[int, tuple[PodRow, ...]] = field(default_factory=dict)  # job id -> held pods
    engine_of_job: dict[int, str] = field(default_factory=dict)
    jobs_of_block: dict[str, set[int]] = field(default_factory=dict)
    blocks: dict[str, JobBlock] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # the blocks' engine ids, sorted
    # The reverse maps of every block, patched block by block (an assembly hands out copies):
    # for lookups, so their order is not a cold build's.
    index: SnapshotIndex = field(default_factory=lambda: SnapshotIndex())


@dataclass
class AssemblyCache:
    """The last assembly of a cluster (the warm snapshot keeps one between rounds): the next one
    makes again only what rows changed since, by row identity: the node tuple when any node,
    metric or device row changed, and otherwise the blocks of the engine jobs whose job or pod
    rows changed (every block when a quota or node name changed), each pod's engine object
    reused while its row is the very same object. The result is equal either way."""

    nodes: NodePart = field(default_factory=NodePart)
    jobs: JobPart = field(default_factory=JobPart)

    def forget(self) -> None:
        """Start over: the next assembly makes everything."""
        self.nodes = NodePart()
        self.jobs = JobPart()


def assemble(
    cluster: Cluster,
    rows: ClusterRows,
    *,
    now: datetime,
    devices_for: Any = None,
    cache: AssemblyCache | None = None,
) -> tuple[ClusterSnapshot, SnapshotIndex]:
    """Rows -> the engine's snapshot and the reverse maps; `cache` holds the last assembly, whose
    parts made from the same row objects are reused (the result is equal either way)."""
    if cache is None:
        cache = AssemblyCache()
    try:
        cache.nodes = assembled_nodes(rows, devices_for, cache.nodes)
        job_blocks_update(cache.jobs, rows, cache.nodes.names)
    except BaseException:
        cache.forget()  # a part may be half updated: the next assembly starts over
        raise
    blocks = [cache.jobs.blocks[engine_id] for engine_id in cache.jobs.order]
    snapshot = snapshot_of(
        cluster,
        cache.nodes.infos,
        tuple(chain.from_iterable(block.pod_infos for block in blocks)),
        tuple(block.job_info for block in blocks),
        now=now,
    )
    return snapshot, index_copy(cache.jobs.index)


def same_rows(current: Mapping[Any, Any], previous: Mapping[Any, Any]) -> bool:
    """The same keys in the same order, each holding the very same row object (compared without
    a Python step per row)."""
    return (
        len(current) == len(previous)
        and list(current) == list(previous)
        and all(map(is_, current.values(), previous.values()))
    )


def changed_keys(current: Mapping[int, Any], previous: Mapping[int, Any]) -> list[int]:
    """The keys whose row is not the very same object as before: new, replaced or gone."""
    keys = list(current)
    changed = list(compress(keys, map(is_not, map(previous.get, keys), current.values())))
    return changed + list(previous.keys() - current.keys())


def assembled_nodes(rows: ClusterRows, devices_for: Any, last: NodePart) -> NodePart:
    """The node infos in name order: the last ones outright when no node, metric or device row
    changed; otherwise each node's info made again unless its rows are the same objects."""
    devices = rows.devices if devices_for else None
    if (
        same_rows(rows.nodes, last.nodes)
        and same_rows(rows.metrics, last.metrics)
        and (devices is None) == (last.devices is None)
        and (devices is None or same_rows(devices, last.devices or {}))
    ):
        return last
    nodes = sorted(rows.nodes.values(), key=lambda n: n.name)
    infos: list[NodeInfo] = []
    made: dict[int, tuple[Any, ...]] = {}
    for node in nodes:
        metric = rows.metrics.get(node.id)
        device_rows = devices.get(node.id, ()) if devices is not None else None
        hit = last.made.get(node.id)
        if hit is not None and hit[0] is node and hit[1] is metric and hit[2] is device_rows:
            info = hit[3]
        else:
            node_devices = devices_for(node, list(device_rows or ())) if devices_for else None
            info = node_info(node, metric, node_devices)  # type: ignore[arg-type]
        made[node.id] = (node, metric, device_rows, info)
        infos.append(info)
    return NodePart(
        nodes=dict(rows.nodes),
        metrics=dict(rows.metrics),
        devices=dict(devices) if devices is not None else None,
        infos=tuple(infos),
        names={node.id: node.name for node in nodes},
        made=made,
    )


_POD_ORDER = attrgetter("namespace", "name")


def held_pods(job: JobRow, pods: Iterable[PodRow]) -> tuple[PodRow, ...]:
    """The pods of a job the snapshot holds, in (namespace, name) order: none finished; every pod
    of an active job; of a job being preempted or requeued, the bound ones; of any other job (a
    cancelled one), the bound ones terminating. A terminating pod holds its node until the
    cluster says it is gone (and is never placed again)."""
    state = job.state
    if state in JobState.ACTIVE:
        held = [pod for pod in pods if pod.phase not in FINISHED_POD_PHASES]
    elif state in JobState.HOLDING:
        held = [p for p in pods if p.phase not in FINISHED_POD_PHASES and p.node_id is not None]
    else:
        held = [
            p
            for p in pods
            if p.phase not in FINISHED_POD_PHASES and p.node_id is not None and p.terminating
        ]
    held.sort(key=_POD_ORDER)
    return tuple(held)


def job_blocks_update(part: JobPart, rows: ClusterRows, node_names: dict[int, str]) -> None:
    """Bring the blocks up to date with `rows`: the blocks of the jobs whose job row or pod rows
    changed are made again, the others kept; every block when a quota or node name changed."""
    dirty_jobs = set(changed_keys(rows.jobs, part.jobs))
    for pod_id in changed_keys(rows.pods, part.pods):
        pod_move(part, part.pods.get(pod_id), rows.pods.get(pod_id), dirty_jobs)
    if rows.quota_names != part.quota_names or node_names != part.node_names:
        dirty_jobs |= rows.jobs.keys() | part.engine_of_job.keys()
    part.pods, part.jobs = dict(rows.pods), dict(rows.jobs)
    part.quota_names, part.node_names = dict(rows.quota_names), node_names

    dirty_blocks: set[str] = set()
    for job_id in dirty_jobs:
        dirty_blocks |= job_place(part, rows.jobs.get(job_id), job_id)
    last_blocks = {e: part.blocks.pop(e) for e in dirty_blocks & part.blocks.keys()}
    for block in last_blocks.values():
        index_drop(part.index, block)
    reusable = {made.row.id: made for block in last_blocks.values() for made in block.made}
    infos = InfoMaker(node_names)
    for engine_id in dirty_blocks:
        member_ids = part.jobs_of_block.get(engine_id)
        if member_ids:
            members = tuple(rows.jobs[job_id] for job_id in sorted(member_ids))
            last = last_blocks.get(engine_id)
            block = job_block(engine_id, members, part, reusable, last, infos)
            part.blocks[engine_id] = block
            index_add(part.index, block)
        else:
            part.jobs_of_block.pop(engine_id, None)
    if (dirty_blocks & part.blocks.keys()) ^ last_blocks.keys():  # a block made or gone
        part.order = sorted(part.blocks)


def pod_move(part: JobPart, before: PodRow | None, after: PodRow | None, touched: set[int]) -> None:
    """A pod row replaced (or new, or gone) in the rows by job; the jobs it touched join
    `touched`."""
    if before is not None:
        own = part.pods_of_job[before.job_id]
        del own[before.id]
        if not own:
            del part.pods_of_job[before.job_id]
        touched.add(before.job_id)
    if after is not None:
        part.pods_of_job.setdefault(after.job_id, {})[after.id] = after
        touched.add(after.job_id)


def job_place(part: JobPart, job: JobRow | None, job_id: int) -> set[str]:
    """A job whose rows changed leaves its block and, if the snapshot holds it (still holding
    resources, or some pod held), joins the block of its engine job id; returns both blocks."""
    touched = set()
    before = part.engine_of_job.pop(job_id, None)
    part.index.engine_id_by_job.pop(job_id, None)
    part.held.pop(job_id, None)
    if before is not None:
        part.jobs_of_block[before].discard(job_id)
        touched.add(before)
    if job is None:
        return touched
    pods = held_pods(job, part.pods_of_job.get(job_id, {}).values())
    if not pods and job.state not in JobState.HOLDING:
        return touched
    engine_id = engine_job_id(job, pods[0].name if pods else None)  # type: ignore[arg-type]
    part.engine_of_job[job_id] = engine_id
    part.index.engine_id_by_job[job_id] = engine_id
    part.held[job_id] = pods
    part.jobs_of_block.setdefault(engine_id, set()).add(job_id)
    touched.add(engine_id)
    return touched


def job_block(
    engine_id: str,
    members: tuple[JobRow, ...],
    part: JobPart,
    reusable: Mapping[int, PodMade],
    last: JobBlock | None,
    infos: InfoMaker,
) -> JobBlock:
    """An engine job's block: its members' held pods in member order (members by row id), each
    pod's info reused from `reusable` when made from the same row for the same job, quota, gang
    and node names (else from `infos`); the job info reused when its members, pod keys and
    quotas are the same."""
    made: list[PodMade] = []
    quotas: list[str | None] = []
    for job in members:
        quota = part.quota_names.get(job.quota_id) if job.quota_id else None
        gang = job.gang_id if job.kind != Job.Kind.POD else None
        quotas.append(quota)
        made += job_pods_made(part.held[job.id], engine_id, quota, gang, infos, reusable)
    pods = tuple(map(attrgetter("row"), made))
    pod_infos = tuple(map(attrgetter("info"), made))
    keys = tuple(map(attrgetter("key"), pod_infos))
    if (
        last is not None
        and len(last.members) == len(members)
        and all(map(is_, last.members, members))
        and last.keys == keys
        and last.quotas == tuple(quotas)
    ):
        job_info = last.job_info
    else:
        job_info = engine_job_info(engine_id, list(members), keys, part.quota_names, infos.topology)
    return JobBlock(
        engine_id=engine_id,
        members=members,
        quotas=tuple(quotas),
        made=tuple(made),
        pods=pods,
        pod_infos=pod_infos,
        keys=keys,
        job_info=job_info,
    )


class InfoMaker:
    """The engine objects of one assembly made cheaply: a pod's info is made from its row, or,
    when the row has the shape of the last row made so (`PodCopier`: the pods of a job, and often
    of many jobs, differ only in name and topology index), is a copy of that info with its own
    name, topology index, job and gang; a topology document is parsed once (jobs share the
    very same documents read)."""

    def __init__(self, node_names: Mapping[int, str]) -> None:
        self.node_names = node_names
        self.shape: PodCopier | None = None  # of the last pod whose info was made from its row
        self.rules: dict[int, tuple[Mapping[str, Any], TopologyRule | None]] = {}

    def pod_info(self, pod: PodRow, job_id: str, quota: str | None, gang: str | None) -> PodInfo:
        """What `pod_info(pod, job_id, quota, gang, node_names)` makes."""
        if self.shape is not None:
            info = self.shape.info_of(pod, job_id, quota, gang)
            if info is not None:
                return info
        info = pod_info(pod, job_id, quota, gang, self.node_names)  # type: ignore[arg-type]
        self.shape = pod_copier(pod, quota, info)
        return info

    def topology(self, spec: Mapping[str, Any]) -> TopologyRule | None:
        """What `parse_topology_rule(spec)` makes, once per document object (kept, so its id
        is not another's while here)."""
        known = self.rules.get(id(spec))
        if known is None or known[0] is not spec:
            known = self.rules[id(spec)] = (spec, parse_topology_rule(spec))
        return known[1]


def job_pods_made(
    pods: Iterable[PodRow],
    job_id: str,
    quota: str | None,
    gang: str | None,
    infos: InfoMaker,
    reusable: Mapping[int, PodMade],
) -> list[PodMade]:
    """The infos of one job's pods: each the one made last time when made from the same row and
    the same rest, else one from `infos`."""
    node_names = infos.node_names
    made: list[PodMade] = []
    for pod in pods:
        node = node_names.get(pod.node_id) if pod.node_id else None
        nominated = node_names.get(pod.nominated_node_id) if pod.nominated_node_id else None
        hit = reusable.get(pod.id)
        if (
            hit is not None
            and hit.row is pod
            and (hit.job_id, hit.quota, hit.gang, hit.node, hit.nominated)
            == (job_id, quota, gang, node, nominated)
        ):
            made.append(hit)
        else:
            info = infos.pod_info(pod, job_id, quota, gang)
            made.append(PodMade(pod, job_id, quota, gang, node, nominated, info))
    return made


def index_add(index: SnapshotIndex, block: JobBlock) -> None:
    """A block's entries into the reverse maps (its jobs' engine ids are set as they are placed)."""
    index.pod_ids.update(zip(block.keys, map(attrgetter("id"), block.pods), strict=True))
    index.pod_uids.update(zip(block.keys, map(attrgetter("uid"), block.pods), strict=True))
    index.job_by_pod_key.update(dict.fromkeys(block.keys, block.engine_id))
    index.jobs_by_engine_id[block.engine_id] = list(block.members)
    index.pod_rows.update(zip(map(attrgetter("id"), block.pods), block.pods, strict=True))


def index_drop(index: SnapshotIndex, block: JobBlock) -> None:
    """A block's entries out of the reverse maps (before the blocks made again are added)."""
    for key, pod in zip(block.keys, block.pods, strict=True):
        del index.pod_ids[key], index.pod_uids[key], index.job_by_pod_key[key]
        del index.pod_rows[pod.id]
    del index.jobs_by_engine_id[block.engine_id]


def index_copy(index: SnapshotIndex) -> SnapshotIndex:
    """The maps as they are now, for a caller (the next assembly patches the kept ones); the job
    lists are shared: the index is read, never written."""
    return SnapshotIndex(
        pod_ids=dict(index.pod_ids),
        pod_uids=dict(index.pod_uids),
        job_by_pod_key=dict(index.job_by_pod_key),
        jobs_by_engine_id=dict(index.jobs_by_engine_id),
        engine_id_by_job=dict(index.engine_id_by_job),
        pod_rows=dict(index.pod_rows),
    )


def build(
    cluster: Cluster,
    *,
    now: datetime,
    devices_for: Any = None,
    without_jobs: Collection[int] = (),
    nodes_only: bool = False,
) -> tuple[ClusterSnapshot, SnapshotIndex]:
    """Read one cluster's rows into an immutable snapshot (a fixed number of queries).

    `devices_for(node, device_rows)` builds a node's opaque device state for the devices plugin;
    without it nodes carry no devices. `without_jobs`, `nodes_only`: as `read_rows`.
    """
    rows = read_rows(
        cluster.id,
        devices=devices_for is not None,
        without_jobs=without_jobs,
        nodes_only=nodes_only,
    )
    return assemble(cluster, rows, now=now, devices_for=devices_for)


def build_for_round(
    cluster: Cluster, *, now: datetime, without_jobs: Collection[int] = (), nodes_only: bool = False
) -> tuple[ClusterSnapshot, SnapshotIndex]:
    """The snapshot a round (and a what-if) reads: rows plus each node's device state;
    `without_jobs`, `nodes_only`: as `read_rows`."""
    return build(
        cluster,
        now=now,
        devices_for=node_devices_builder(cluster),
        without_jobs=without_jobs,
        nodes_only=nodes_only,
    )
