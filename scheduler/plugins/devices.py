"""DeviceShare plugin. Extension points: PreFilter, Filter (slot-limit protocol), Score, Reserve.

Device choice is part of the offer-slot count: for each node with devices, the plugin allocates a
job's pods one after another with the real allocator (`scheduler.devices`), so topology and gang
decisions see exactly the pods that fit a node's cards. Reserve then allocates the same way and
returns each pod's devices and annotations. Pods without device requests cost nothing (the plugin
answers None). A node without devices (no Device CR) is not constrained, as in Koordinator: the
resource-fit filter counts its extended resources, and it is never looked at one by one.

`NodeInfo.devices` is a `NodeDevices` (see `scheduler.devices.build_node_devices`) or a sequence
of `Device`, which the plugin builds with the node's labels. Usage comes from the bound pods'
`scheduling.koordinator.sh/device-allocated` annotations; a bound device pod without one is given
cards by the allocator itself, so its capacity is never handed out twice. `DeviceFleet` groups
nodes by device layout and usage, so 5,000 identical idle nodes cost one allocation run per job
shape. A pod's `gpu-partition-spec` annotation makes the node's partition table bind, and a
shared-GPU pod labelled `koordinator.sh/gpu-isolation-provider` fits only nodes with the same
label (Koordinator's Filter; a node without a Device CR is not checked, as above).
Args: `{"scoring": "LeastAllocated" | "MostAllocated"}`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from scheduler.causes import DEVICE_REQUEST_INVALID, DEVICES_UNFIT
from scheduler.devices import (
    Device,
    DeviceRequest,
    DeviceRequestError,
    DeviceUsage,
    NodeDevices,
    build_node_devices,
    explain,
    parse_device_allocated,
    parse_device_request,
    usage_from_pods,
)
from scheduler.devices.annotations import device_allocated_data
from scheduler.devices.fleet import CardCheck, DeviceFleet, Held
from scheduler.devices.memory import FleetMemory, Runs
from scheduler.devices.model import Shortage
from scheduler.devices.names import (
    ANNOTATION_DEVICE_ALLOCATED,
    ANNOTATION_GPU_PARTITION_SPEC,
    ANNOTATION_JOINT_ALLOCATE,
    DEVICE_RESOURCES,
    LABEL_GPU_ISOLATION_PROVIDER,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    LABEL_PARTITION_POLICY,
    Scoring,
)
from scheduler.framework import (
    Arg,
    Code,
    FloatArray,
    Handle,
    IntArray,
    Plan,
    PodAllocation,
    Refusal,
    ReserveResult,
    Status,
)
from scheduler.model import JobInfo, NodeInfo, PodInfo
from scheduler.plugin_args import PluginArgs
from scheduler.state import CycleState
from scheduler.state_keys import StateKey
from scheduler.vocabulary import SCHEDULING_ANNOTATION_PREFIX

SCORING: Scoring = "LeastAllocated"  # Koordinator's default node order for cards


@dataclass
class DeviceState:
    """The plugin's per-round data, kept under its `DeviceShare.key`."""

    fleet: DeviceFleet
    held: dict[str, tuple[int, Held]] = field(default_factory=dict)  # pod key -> (node, devices)
    reserved: dict[str, list[str]] = field(default_factory=dict)  # job id -> pod keys reserved
    requests: dict[tuple[Any, ...], DeviceRequest | list[str] | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # unreadable annotations of bound pods
    runs: dict[tuple[str, ...], tuple[Runs, int]] = field(
        default_factory=dict
    )  # pod keys -> `device_runs`, asked for again by every dry run of a job
    by_pod: dict[str, DeviceRequest | list[str] | None] = field(default_factory=dict)

    def request(self, pod: PodInfo) -> DeviceRequest | list[str] | None:
        """`_request`, remembered per pod key (a pod's requests are fixed for the round)."""
        try:
            return self.by_pod[pod.key]
        except KeyError:
            found = self.by_pod[pod.key] = _request(self.requests, pod)
            return found

    def device_runs(self, pods: Sequence[PodInfo]) -> tuple[Runs, int]:
        """`pods` as runs of one device request, and how many ask for no device (remembered
        per pod list)."""
        keys = tuple(p.key for p in pods)
        found = self.runs.get(keys)
        if found is None:
            runs = _runs(self.request, pods)
            device_runs = tuple((r, c) for r, c in runs if r is not None)
            found = self.runs[keys] = (device_runs, sum(c for r, c in runs if r is None))
        return found


class DeviceShare:
    name = "DeviceShare"
    extension_points = frozenset({"Setup", "PreFilter", "Filter", "Score", "Reserve"})
    # A node's count reads its cards' usage (moved only by Reserve, for pods then assumed onto
    # it), the released bound pods' cards there, and the pods' device requests (requests and
    # scheduling annotations, part of the template): `scheduler.slot_memo` may recount only
    # moved nodes. The isolation-provider label is the one label it reads.
    slots_by_template = True
    pod_fields = (
        "requests",
        "annotations:" + SCHEDULING_ANNOTATION_PREFIX,
        "labels:" + LABEL_GPU_ISOLATION_PROVIDER,
    )
    arguments: ClassVar[Mapping[str, Arg]] = {
        "scoring": Arg("choice", choices=("LeastAllocated", "MostAllocated"), default=SCORING),
    }

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        # a `Scoring`: checked against `arguments` when the profile builds the plugin
        self.scoring: Scoring = PluginArgs(self.arguments, args)["scoring"]
        self.key: StateKey[DeviceState] = StateKey(self.name, self._device_state)

    # --- setup ----------------------------------------------------------------------------------
    def setup(self, state: CycleState) -> None:
        state.write(self.key, self._device_state(state))

    def _device_state(self, state: CycleState) -> DeviceState:
        nodes: dict[int, NodeDevices] = {}
        templates: _Templates = {}
        for idx, info in enumerate(state.nodes):
            devices = _node_devices(info, templates)
            if devices is not None and devices.has_devices:
                nodes[idx] = devices
        requests: dict[tuple[Any, ...], DeviceRequest | list[str] | None] = {}
        problems: list[str] = []
        usages: dict[int, DeviceUsage] = {}
        for idx, devices in nodes.items():
            bound = state.bound_on_node.get(idx, [])
            usage, unreadable = usage_from_pods(devices, [p.annotations for p in bound])
            problems.extend(f"{devices.node}: {p}" for p in unreadable)
            usages[idx] = usage
        fleet = DeviceFleet(len(state.nodes), nodes, usages, self.scoring, self._memory(state))
        held: dict[str, tuple[int, Held]] = {}
        holders: dict[int, list[tuple[int, Held]]] = {}
        for idx in nodes:
            for pod in state.bound_on_node.get(idx, []):
                devices_held = _held_by(pod, fleet, idx, requests)
                if devices_held:
                    held[pod.key] = (idx, devices_held)
                    holders.setdefault(idx, []).append((state.bound_id[pod.key], devices_held))
        fleet.track_holders(holders)
        return DeviceState(fleet, held, {}, requests, problems)

    def _memory(self, state: CycleState) -> FleetMemory | None:
        """The fleet's counts from earlier rounds, when the caller keeps a warm snapshot's
        `engine_cache` (a new one is left there for the next round)."""
        cache = state.snapshot.engine_cache
        if cache is None:
            return None
        memory = cache.get(self.name)
        if not isinstance(memory, FleetMemory):
            memory = cache[self.name] = FleetMemory()
        return memory

    # --- PreFilter ------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> Status:
        ds = self._state(state)
        device_runs, _ = ds.device_runs(pods)  # remembered: Filter asks for the same list
        if all(request is not _NEVER for request, _ in device_runs):
            return Status.success()
        for pod in pods:
            parsed = ds.request(pod)
            if isinstance(parsed, list):
                return Status(
                    Code.INVALID,
                    f"pod {pod.key}: " + "; ".join(parsed),
                    {},
                    self.name,
                    DEVICE_REQUEST_INVALID,
                    {"pod": pod.key, "problems": tuple(parsed)},
                )
        return Status.success()

    # --- Filter (slot limits) -------------------------------------------------------------------
    def slot_limits(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> IntArray | None:
        ds = self._state(state)
        device_runs, free_pods = ds.device_runs(pods)
        if not device_runs:
            return None
        released, kind = state.released_mask, state.release_kind
        slots: IntArray = ds.fleet.slots(node_indices, device_runs, released, kind) + free_pods
        # Like Koordinator, a node without a Device CR is left to the resource-fit filter.
        slots[ds.fleet.group[node_indices] < 0] = len(pods)
        return slots

    def node_checks(
        self, state: CycleState, on_node: Mapping[int, Sequence[PodInfo]]
    ) -> dict[int, CardCheck]:
        """Per node, its cards with the dry run's released pods' cards free (left out: a node
        without a Device CR, or whose pods ask for no devices)."""
        released = state.released_mask
        if released is None:
            return {}
        ds = self._state(state)
        checks: dict[int, CardCheck] = {}
        for node, pods in on_node.items():
            if node not in ds.fleet.nodes:
                continue
            device_runs, _ = ds.device_runs(pods)
            if device_runs:
                checks[node] = ds.fleet.card_check(node, device_runs, released)
        return checks

    def explain(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> dict[Refusal, int]:
        ds = self._state(state)
        device_runs, _ = ds.device_runs(pods)  # remembered: the failed try counted the same list
        if not device_runs:
            return {}
        return ds.fleet.reasons(node_indices, device_runs[0][0])

    # --- Score ----------------------------------------------------------------------------------
    def score_nodes(self, state: CycleState, job: JobInfo, node_indices: IntArray) -> FloatArray:
        """0..100 per node by the scoring strategy for the job's first device pod; 0 elsewhere."""
        ds = self._state(state)
        pods = state.pending_pods(job)
        request = ds.request(pods[0]) if pods else None
        if request is None or isinstance(request, list):
            zeros: FloatArray = np.zeros(len(node_indices), dtype=np.float64)
            return zeros
        return ds.fleet.scores(node_indices, request)

    # --- Reserve --------------------------------------------------------------------------------
    def reserve(self, state: CycleState, job: JobInfo, plan: Plan) -> ReserveResult:
        ds = self._state(state)
        fleet = ds.fleet
        # The plan lists pods in placement order, the order the slot counts assumed them in.
        pods = [state.pods[key] for key in plan.assignment]
        allocations: dict[str, PodAllocation] = {}
        done: list[str] = []
        for pod in pods:
            request = ds.request(pod)
            if request is None or isinstance(request, list):
                continue
            idx = plan.assignment[pod.key]
            node = fleet.nodes.get(idx)
            if node is None:
                continue  # no Device CR: the kubelet's device plugin picks the cards
            allocation = fleet.allocate(idx, request)
            if allocation is None:
                self._release(ds, done)
                reason = explain(node, fleet.usage[idx], request)
                where = state.node_names[idx]
                return ReserveResult(
                    Status(
                        Code.UNSCHEDULABLE,
                        f"pod {pod.key} on {where}: {reason}",
                        {},
                        self.name,
                        DEVICES_UNFIT,
                        _unfit_values(pod.key, where, reason),
                    )
                )
            fleet.apply(idx, allocation.devices)
            ds.held[pod.key] = (idx, allocation.devices)
            done.append(pod.key)
            devices = device_allocated_data(allocation.devices)
            allocations[pod.key] = PodAllocation(devices, allocation.annotations)
        ds.reserved[job.id] = done
        return ReserveResult(Status.success(), allocations)

    def unreserve(self, state: CycleState, job: JobInfo, plan: Plan) -> None:
        ds = self._state(state)
        self._release(ds, ds.reserved.pop(job.id, []))

    def _release(self, ds: DeviceState, pod_keys: list[str]) -> None:
        for key in pod_keys:
            idx, held = ds.held.pop(key)
            ds.fleet.release(idx, held)

    def _state(self, state: CycleState) -> DeviceState:
        return state.get_or_create(self.key)


# --- helpers ------------------------------------------------------------------------------------

RequestCache = dict[tuple[Any, ...], DeviceRequest | list[str] | None]


_Templates = dict[tuple[Any, ...], tuple[Sequence[Device], NodeDevices]]
"""Nodes sharing one sequence of `Device` (by identity) and the labels `build_node_devices`
reads: the first one's `NodeDevices`, renamed for the others."""

_LAYOUT_LABELS = (
    LABEL_GPU_VENDOR,
    LABEL_GPU_MODEL,
    LABEL_PARTITION_POLICY,
    LABEL_GPU_ISOLATION_PROVIDER,
)


def _node_devices(info: NodeInfo, templates: _Templates) -> NodeDevices | None:
    devices = info.devices
    if devices is None or isinstance(devices, NodeDevices):
        return devices
    if isinstance(devices, Sequence) and all(isinstance(d, Device) for d in devices):
        key = (id(devices), *(info.labels.get(label) for label in _LAYOUT_LABELS))
        known = templates.get(key)
        if known is not None and known[0] is devices:
            return known[1].renamed(info.name)
        built = build_node_devices(info.name, devices, info.labels)
        templates[key] = (devices, built)
        return built
    raise TypeError(f"node {info.name}: devices must be NodeDevices or a sequence of Device")


def _request(cache: RequestCache, pod: PodInfo) -> DeviceRequest | list[str] | None:
    """The pod's parsed device request (None: no devices; a list: validation messages)."""
    if DEVICE_RESOURCES.isdisjoint(pod.requests):
        return None
    joint = pod.annotations.get(ANNOTATION_JOINT_ALLOCATE, "")
    spec = pod.annotations.get(ANNOTATION_GPU_PARTITION_SPEC)
    isolation = pod.labels.get(LABEL_GPU_ISOLATION_PROVIDER, "")
    key = (tuple(sorted(pod.requests.items())), joint, spec, isolation)
    if key not in cache:
        try:
            cache[key] = parse_device_request(pod.requests, pod.annotations, pod.labels)
        except DeviceRequestError as error:
            cache[key] = error.messages
    return cache[key]


def _runs(
    request_of: Callable[[PodInfo], DeviceRequest | list[str] | None], pods: Sequence[PodInfo]
) -> list[tuple[DeviceRequest | None, int]]:
    """Consecutive pods with one device request, as (request, count); invalid counts as unfit."""
    runs: list[tuple[DeviceRequest | None, int]] = []
    for pod in pods:
        parsed = request_of(pod)
        request = _NEVER if isinstance(parsed, list) else parsed
        # (pods asking alike share one parsed request: `is` answers before the field compare)
        if runs and (runs[-1][0] is request or runs[-1][0] == request):
            runs[-1] = (request, runs[-1][1] + 1)
        else:
            runs.append((request, 1))
    return runs


# Stands in for an invalid request (PreFilter rejects those first): no node has 2**40 RDMA units,
# so it fits nowhere.
_NEVER = DeviceRequest(rdma=1 << 40)


def _held_by(pod: PodInfo, fleet: DeviceFleet, idx: int, cache: RequestCache) -> Held:
    """The devices a bound pod holds (already counted in the fleet when it has an annotation)."""
    raw = pod.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if raw:
        try:
            return parse_device_allocated(raw)
        except ValueError:
            return ()
    request = _request(cache, pod)
    if request is None or isinstance(request, list):
        return ()
    # Bound by someone who wrote no annotation: account it on the cards we would have chosen
    # (nodes in the same state choose alike, so the fleet plans once per group).
    devices = fleet.plan(idx, request)
    if devices is None:
        return ()
    fleet.apply(idx, devices)
    return devices


def _unfit_values(pod: str, node: str, refused: str) -> dict[str, Any]:
    """The numbers behind a pod whose planned node's cards could not be allocated: the pod, the
    node and, for a shortage, the device type and the cards needed, free and on the node (the
    allocator's words otherwise, as `refusal`)."""
    values: dict[str, Any] = {"pod": pod, "node": node}
    if isinstance(refused, Shortage):
        values["resource"] = refused.resource
        counted = {"needed": refused.needed, "free": refused.free, "cards": refused.cards}
        values.update({k: v for k, v in counted.items() if v >= 0})
    else:
        values["refusal"] = str(refused)
    return values
