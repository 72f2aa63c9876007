"""`CycleState`: the one mutable object of a round, holding array-backed node resources.

Nodes are indexed in name order (so a node's index is also its name tie-break rank), resources in
a fixed column order. `allocatable` and `used` are int64 arrays (nodes x resources); `used` counts
bound pods, pods assumed earlier in this round, and resources reserved for nominated pods of jobs
not yet placed; `free_now` (allocatable - used) is kept in step. The arrays are column-major
because the per-job path reads whole resource columns across all nodes. Bound pods get a fixed index
(`bound_keys`), so a preemption dry run names the pods it treats as gone with a boolean array: it
sets `released` (resources freed per node) and `released_mask` (over bound pods) for the duration
of one `with state.releasing(...)` block.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from scheduler.framework import BoolArray, IntArray, NodeMask
from scheduler.model import PODS, ClusterSnapshot, JobInfo, PodInfo
from scheduler.nominations import timed_out_jobs
from scheduler.state_keys import StateKey
from scheduler.templates import DEFAULT_TEMPLATE_FIELDS, template_key
from scheduler.topology import TopologyTree
from scheduler.vocabulary import natural_key

if TYPE_CHECKING:
    from scheduler.slot_memo import SlotMemo

T = TypeVar("T")

UNLIMITED_PODS = 1 << 40  # a node that declares no "pods" allocatable does not limit pod count


def _jobs(snapshot: ClusterSnapshot) -> dict[str, JobInfo]:
    """The snapshot's jobs by id; a pod whose job the snapshot omits is a job of its own."""
    jobs = {j.id: j for j in snapshot.jobs}
    for p in snapshot.pods:
        if p.job_id not in jobs:
            jobs[p.job_id] = JobInfo(
                id=p.job_id,
                pod_keys=(p.key,),
                priority=p.priority,
                quota=p.quota,
                preemption_policy=p.preemption_policy,
            )
    return jobs


def placement_order(pods: Sequence[PodInfo]) -> list[PodInfo]:
    """Pods in assignment order: topology index when given, then natural name order."""
    return sorted(
        pods,
        key=lambda p: (
            p.topology_index is None,
            p.topology_index or 0,
            natural_key(p.name),
            p.namespace,
        ),
    )


@dataclass
class FrameworkCache:
    """What the framework itself remembers for the round (plugins keep theirs under a
    `StateKey`): each node-mask Filter's verdicts and their combination per pod template
    (`Framework.mask_verdicts`, `Framework.pod_mask`) and the offer-slot memo
    (`scheduler.slot_memo`, made on first use)."""

    masks: dict[tuple[Any, ...], NodeMask] = field(default_factory=dict)
    verdicts: dict[tuple[Any, ...], list[NodeMask]] = field(default_factory=dict)
    slot_memo: SlotMemo | None = None


class CycleState:
    """Per-round mutable state shared by the framework and its plugins: the snapshot indexed
    (nodes, jobs, pods, resource columns), node resources (`allocatable`, `used`, `free_now`),
    bound pods (`bound_*`), nominated pods' reservations, what this round assumed and evicts, a
    dry run's release (`releasing`), the framework's `cache` and the plugins' typed data
    (`read`, `get_or_create`, `write` by `StateKey`)."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.nodes = sorted(snapshot.nodes, key=lambda n: n.name)
        self.node_names = [n.name for n in self.nodes]
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        self.pods: dict[str, PodInfo] = {p.key: p for p in snapshot.pods}
        self.jobs: dict[str, JobInfo] = _jobs(snapshot)
        self.job_of_pod = {k: j.id for j in self.jobs.values() for k in j.pod_keys}
        self._index_resources()
        self._vectors: dict[str, IntArray] = {}
        self._request_rows: dict[tuple[tuple[str, Any], ...], IntArray] = {}
        self._index_bound()
        self.nomination_timeouts = timed_out_jobs(snapshot)
        self._reserve_nominated()
        self.free_now: IntArray = np.asfortranarray(self.allocatable - self.used)  # tracks `used`
        # Per node, how many times pods were taken onto or given back from it this round: what a
        # plugin's per-node answer depends on changes only with it (see `node_checks`).
        self.node_version: list[int] = [0] * len(self.nodes)
        self.touched: list[int] = []  # every such move's node, in order (see `slot_memo`)
        self.topology = TopologyTree.build(snapshot.topology, self.nodes)
        self.assumed: dict[str, int] = {}  # pod key -> node index, placed this round
        self.evicting: set[str] = set()  # pod keys chosen as victims this round
        self.released: IntArray | None = None
        self.release_kind: Hashable = None  # see `releasing`
        self.released_mask: BoolArray | None = None  # over bound pods, during a dry run
        self._free_released: IntArray | None = None
        self.cache = FrameworkCache()
        self._data: dict[StateKey[Any], Any] = {}  # see `read`
        # Data by plain name, for plugins written before `StateKey`s (out-of-tree ones): the
        # in-tree plugins keep theirs under typed keys.
        self.plugin_data: dict[str, Any] = {}
        self._pending: dict[str, list[PodInfo]] = {}
        self._unassumed: dict[str, tuple[int, list[PodInfo]]] = {}  # see `pending_pods`
        # The pod fields a template key covers: the profile's Filters' (`Framework.start`).
        self.template_fields: tuple[str, ...] = DEFAULT_TEMPLATE_FIELDS
        self._templates: dict[str, tuple[Any, ...]] = {}
        self._template_ids: dict[tuple[Any, ...], int] = {}  # see `template_id`
        self._template_of: dict[str, int] = {}  # pod key -> its template's id
        self._totals: IntArray | None = None

    def _index_resources(self) -> None:
        """Resource columns (every resource a node offers or a pod asks, in name order) and
        `allocatable` (nodes x resources, column-major: the per-job hot path reads whole
        resource columns across all nodes)."""
        names: set[str] = {PODS}
        for n in self.nodes:
            names.update(n.allocatable)
        for p in self.snapshot.pods:
            names.update(p.requests)
        self.resources = sorted(names)
        self.resource_index = {r: i for i, r in enumerate(self.resources)}
        shape = (len(self.nodes), len(self.resources))
        allocatable: IntArray = np.zeros(shape, dtype=np.int64)
        pods_col = self.resource_index[PODS]
        for i, n in enumerate(self.nodes):
            for r, v in n.allocatable.items():
                allocatable[i, self.resource_index[r]] = int(v)
            if PODS not in n.allocatable:
                allocatable[i, pods_col] = UNLIMITED_PODS
        self.allocatable: IntArray = np.asfortranarray(allocatable)
        self.used: IntArray = np.zeros(shape, dtype=np.int64, order="F")

    def _index_bound(self) -> None:
        """Pods bound to a node, by node index (the preemption candidates are drawn from these),
        every bound pod's fixed position, by which dry runs name the pods they release, and
        what they use."""
        self.bound_on_node: dict[int, list[PodInfo]] = {}
        self.bound_keys: list[str] = []
        self.bound_id: dict[str, int] = {}
        bound_rows: list[int] = []
        bound_vectors: list[IntArray] = []
        for p in self.snapshot.pods:
            if p.consumes_node and p.node in self.node_index:
                idx = self.node_index[p.node]
                bound_rows.append(idx)
                bound_vectors.append(self.vector(p))
                self.bound_on_node.setdefault(idx, []).append(p)
                self.bound_id[p.key] = len(self.bound_keys)
                self.bound_keys.append(p.key)
        self.bound_node: IntArray = np.array(bound_rows, dtype=np.int64)  # by `bound_keys` position
        if bound_rows:
            np.add.at(self.used, self.bound_node, np.array(bound_vectors))

    def _reserve_nominated(self) -> None:
        """Nominated pods of jobs not yet placed hold their nominated node's resources against
        pods of lower or equal priority (kube-scheduler's rule for nominated pods): a job of
        higher priority may use them (`lower_reservations_released`). A gang that has waited
        longer than its waiting time lets its nodes go."""
        self.reservations: dict[str, list[tuple[int, IntArray]]] = {}
        self.reservation_priority: dict[str, int] = {}
        for p in self.snapshot.pods:
            if p.job_id in self.nomination_timeouts:
                continue
            if p.is_pending and p.nominated_node in self.node_index:
                idx = self.node_index[p.nominated_node or ""]
                vec = self.vector(p)
                self.used[idx] += vec
                self.reservations.setdefault(p.job_id, []).append((idx, vec))
                held = self.reservation_priority.get(p.job_id, p.priority)
                self.reservation_priority[p.job_id] = max(held, p.priority)

    # --- plugins' typed data ------------------------------------------------------------------
    def read(self, key: StateKey[T]) -> T | None:
        """The data kept under `key` this round, or None when nothing wrote or made it yet."""
        found: T | None = self._data.get(key)
        return found

    def get_or_create(self, key: StateKey[T]) -> T:
        """The data kept under `key`, made by the key's factory the first time it is asked for."""
        try:
            found: T = self._data[key]
        except KeyError:
            if key.factory is None:
                raise LookupError(f"{key!r} has no factory and nothing wrote it") from None
            found = self._data[key] = key.factory(self)
        return found

    def write(self, key: StateKey[T], data: T) -> None:
        """Keep `data` under `key` for the round (a Setup's precomputed data)."""
        self._data[key] = data

    # --- resource vectors -------------------------------------------------------------------
    def vector(self, pod: PodInfo) -> IntArray:
        """The pod's request as a resource row (with one `pods` slot), cached per pod; pods
        asking the same share one read-only row."""
        vec = self._vectors.get(pod.key)
        if vec is None:
            asked = tuple(pod.requests.items())
            vec = self._request_rows.get(asked)
            if vec is None:
                vec = np.zeros(len(self.resources), dtype=np.int64)
                for r, v in asked:
                    vec[self.resource_index[r]] = int(v)
                vec[self.resource_index[PODS]] += 1
                vec.flags.writeable = False
                self._request_rows[asked] = vec
            self._vectors[pod.key] = vec
        return vec

    def totals(self) -> IntArray:
        """Allocatable summed over all nodes, per resource (cached)."""
        if self._totals is None:
            self._totals = self.allocatable.sum(axis=0)
        return self._totals

    def free(self, node_indices: IntArray | None = None) -> IntArray:
        """Free resources, including what a dry run releases. Read-only: copy before writing."""
        if self.released is None:
            free = self.free_now
        elif node_indices is not None and self._free_released is None:
            rows: IntArray = self.free_now[node_indices] + self.released[node_indices]
            return rows  # a few nodes asked during a dry run: no need to add up all of them
        else:
            if self._free_released is None:
                self._free_released = self.free_now + self.released
            free = self._free_released
        if node_indices is None:
            view = free.view()
            view.flags.writeable = False
            return view
        result: IntArray = free[node_indices]
        return result

    def _take(self, idx: int, vec: IntArray) -> None:
        self.used[idx] += vec
        self.free_now[idx] -= vec
        self.node_version[idx] += 1
        self.touched.append(idx)

    def _give(self, idx: int, vec: IntArray) -> None:
        self.used[idx] -= vec
        self.free_now[idx] += vec
        self.node_version[idx] += 1
        self.touched.append(idx)

    def template(self, pod: PodInfo) -> tuple[Any, ...]:
        """`template_key(pod, self.template_fields)`, computed once per pod per round."""
        key = self._templates.get(pod.key)
        if key is None:
            key = template_key(pod, self.template_fields)
            self._templates[pod.key] = key
        return key

    def template_id(self, pod: PodInfo) -> int:
        """A small int naming the pod's template for the round: equal ids, equal templates
        (an int hashes and compares faster than the template's nested tuples)."""
        found = self._template_of.get(pod.key)
        if found is None:
            template = self.template(pod)
            found = self._template_ids.setdefault(template, len(self._template_ids))
            self._template_of[pod.key] = found
        return found

    # --- assume / forget ----------------------------------------------------------------------
    def assume(self, assignment: Mapping[str, int]) -> None:
        for key, idx in assignment.items():
            self._take(idx, self.vector(self.pods[key]))
            self.assumed[key] = idx

    def forget(self, assignment: Mapping[str, int]) -> None:
        for key, idx in assignment.items():
            self._give(idx, self.vector(self.pods[key]))
            self.assumed.pop(key, None)

    def release_reservations(self, job_id: str) -> list[tuple[int, IntArray]]:
        """Give back a job's nominated reservations while it is evaluated (it may use them)."""
        held = self.reservations.pop(job_id, [])
        for idx, vec in held:
            self._give(idx, vec)
        return held

    def restore_reservations(self, job_id: str, held: list[tuple[int, IntArray]]) -> None:
        for idx, vec in held:
            self._take(idx, vec)
        if held:
            self.reservations[job_id] = held

    def hold_nominations(self, job_id: str, nominations: Mapping[str, str], priority: int) -> None:
        """A preemptor's pods nominated this round hold their nodes for the rest of the round, as
        nominations from earlier rounds do (in place of any the job held before): a job of lower
        or equal priority placed later in the round must not take the room its victims free."""
        self.release_reservations(job_id)
        held: list[tuple[int, IntArray]] = []
        for key, node in nominations.items():
            idx = self.node_index.get(node)
            if idx is None:
                continue
            vec = self.vector(self.pods[key])
            self._take(idx, vec)
            held.append((idx, vec))
        if held:
            self.reservations[job_id] = held
            self.reservation_priority[job_id] = priority

    @contextmanager
    def lower_reservations_released(self, priority: int) -> Iterator[None]:
        """While a job of `priority` is evaluated, reservations of lower-priority nominated jobs
        are room it may take; they are held again after (a job that took them leaves their node
        short, and their owner finds out when its own turn comes)."""
        lower = [j for j, p in self.reservation_priority.items() if p < priority]
        held = [(j, self.release_reservations(j)) for j in lower if j in self.reservations]
        try:
            yield
        finally:
            for job_id, vectors in held:
                self.restore_reservations(job_id, vectors)

    @contextmanager
    def releasing(
        self, released: IntArray, pods: BoolArray, kind: Hashable = None
    ) -> Iterator[None]:
        """Treat the bound pods marked in `pods` (freeing `released` per node) as gone, for a
        preemption dry run. Both arrays are read and never changed, here or after: the offer-slot
        memo keeps them to tell which nodes a later dry run releases differently
        (`scheduler.slot_memo`), so another release comes in new arrays. `kind` names the sort of
        release (every candidate, or those up to a priority band): the memo compares a dry run
        with the last one of its kind, which releases nearly the same pods."""
        previous = (self.released, self.released_mask, self._free_released, self.release_kind)
        self.released, self.released_mask, self._free_released = released, pods, None
        self.release_kind = kind
        try:
            yield
        finally:
            (self.released, self.released_mask, self._free_released, self.release_kind) = previous

    def pending_jobs(self) -> list[JobInfo]:
        """The jobs with a pod still to place (those whose `pending_pods` is not empty), in
        `jobs` order: most jobs of a busy cluster are running ones, told apart by a set."""
        waiting = {k for k, p in self.pods.items() if p.is_pending and k not in self.assumed}
        return [job for job in self.jobs.values() if not waiting.isdisjoint(job.pod_keys)]

    def pending_pods(self, job: JobInfo) -> list[PodInfo]:
        """The job's pods still to place, in placement order (sorted once per round), as a new
        list. Those not yet assumed are filtered again only after a move (`touched` grows
        with every assume and forget): a job is asked many times between two."""
        ordered = self._pending.get(job.id)
        if ordered is None:
            pods = [
                self.pods[k] for k in job.pod_keys if k in self.pods and self.pods[k].is_pending
            ]
            ordered = placement_order(pods)
            self._pending[job.id] = ordered
        moves = len(self.touched)
        known = self._unassumed.get(job.id)
        if known is None or known[0] != moves:
            known = self._unassumed[job.id] = (
                moves,
                [p for p in ordered if p.key not in self.assumed],
            )
        return list(known[1])
