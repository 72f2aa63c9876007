"""Choosing a pod's devices on one node: GPUs, Ascend NPUs and vNPUs, Cambricon sMLUs, RDMA NICs.

Whole-card requests follow Koordinator's `allocateByPartition` on nodes with a partition table
(Honor refuses with Koordinator's own reasons, Prefer falls back to the NUMA/PCIe tree).

`allocate` returns the devices and annotations for one pod, or None; `explain` says why not.
`count_fits` counts how many identical pods fit one after another (the offer slots the topology
and gang plugins see), and `node_score` scores a node for a placement. Card order inside a scope
follows the scoring strategy: LeastAllocated (spread, the default) takes the least used card,
MostAllocated (binpack) the most used one; ties go to the lower minor.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.devices import names as n
from scheduler.devices.annotations import render_annotations
from scheduler.devices.ascend import ERR_NO_MATCHED_TEMPLATE, match_npu_request
from scheduler.devices.model import AllocatedDevice, Device, DeviceUsage, NodeDevices, Shortage
from scheduler.devices.partitions import choose_partition
from scheduler.devices.rdma import nics_available, pick_nics
from scheduler.devices.request import DeviceRequest, GPUShape
from scheduler.devices.topology import pcie_key, pick_cards

# Koordinator's reasons (allocator_gpu.go), so a refusal reads the same in both schedulers.
ERR_MISSING_PARTITION_TABLE = "node(s) missing GPU Partition Table"
ERR_UNSUPPORTED_GPU_COUNT = "node(s) Unsupported number of GPU requests"
ERR_INSUFFICIENT_PARTITIONED = Shortage("Insufficient Partitioned GPU Devices", "gpu")
ERR_FPGA = Shortage("Insufficient fpga devices (koordweb does not allocate FPGAs)", "fpga")
INSUFFICIENT_GPU = "Insufficient gpu"  # the words nodes short of cards are counted under
# plugin.go Filter's reason for a shared-GPU pod whose isolation provider the node lacks.
ERR_ISOLATION_PROVIDER = "GPUIsolationProviderHAMICore not found on the node"


@dataclass(frozen=True)
class DeviceAllocation:
    """One pod's devices on a node and the annotations that record them."""

    node: str
    devices: tuple[AllocatedDevice, ...]
    annotations: dict[str, str] = field(compare=False)


def allocate(
    node: NodeDevices,
    usage: DeviceUsage,
    request: DeviceRequest,
    scoring: n.Scoring = "LeastAllocated",
) -> DeviceAllocation | None:
    """The devices one pod gets on `node` given `usage`, or None when it does not fit.

    `usage` is not changed: the caller applies the allocation it accepts.
    """
    plan = _plan(node, usage, request, scoring)
    if isinstance(plan, str):
        return None
    return DeviceAllocation(node.node, plan, render_annotations(node, plan))


def plan_devices(
    node: NodeDevices,
    usage: DeviceUsage,
    request: DeviceRequest,
    scoring: n.Scoring = "LeastAllocated",
) -> tuple[AllocatedDevice, ...] | None:
    """The devices `allocate` would give, without rendering annotations (None: no fit)."""
    plan = _plan(node, usage, request, scoring)
    return None if isinstance(plan, str) else plan


def explain(node: NodeDevices, usage: DeviceUsage, request: DeviceRequest) -> str:
    """Why `request` does not fit `node` ("" when it does)."""
    plan = _plan(node, usage, request, "LeastAllocated")
    return plan if isinstance(plan, str) else ""


def count_fits(
    node: NodeDevices,
    usage: DeviceUsage,
    request: DeviceRequest,
    limit: int,
    scoring: n.Scoring = "LeastAllocated",
) -> int:
    """How many pods asking for `request` fit on `node`, allocated one after another (<= limit)."""
    trial = usage.copy()
    fitted = 0
    while fitted < limit:
        plan = _plan(node, trial, request, scoring)
        if isinstance(plan, str):
            break
        trial.apply(plan)
        fitted += 1
    return fitted


def score_request(
    node: NodeDevices,
    usage: DeviceUsage,
    request: DeviceRequest,
    scoring: n.Scoring = "LeastAllocated",
) -> int | None:
    """`node_score` of the allocation `request` would get (None when it does not fit).

    Cheaper than `allocate` + `node_score`: no annotations are rendered.
    """
    plan = _plan(node, usage, request, scoring)
    if isinstance(plan, str):
        return None
    return _score_after(node, usage, plan, scoring)


def node_score(
    node: NodeDevices,
    usage: DeviceUsage,
    allocation: DeviceAllocation | None,
    scoring: n.Scoring = "LeastAllocated",
) -> int:
    """0..100: free GPU share after the allocation (LeastAllocated), used share (MostAllocated)."""
    return _score_after(node, usage, allocation.devices if allocation else (), scoring)


def _score_after(
    node: NodeDevices,
    usage: DeviceUsage,
    devices: tuple[AllocatedDevice, ...],
    scoring: n.Scoring,
) -> int:
    healthy = [i for i, d in enumerate(node.gpus) if d.health]
    if not healthy:
        return 0
    after = usage.copy() if devices else usage
    after.apply(devices)
    used = sum(min(after.core[i], n.FULL) + min(after.ratio[i], n.FULL) for i in healthy)
    used_percent = used * 100 // (2 * n.FULL * len(healthy))
    return used_percent if scoring == "MostAllocated" else 100 - used_percent


# -- planning --------------------------------------------------------------------------------


def _plan(
    node: NodeDevices, usage: DeviceUsage, request: DeviceRequest, scoring: n.Scoring
) -> tuple[AllocatedDevice, ...] | str:
    gpus = _plan_accelerators(node, usage, request, scoring)
    if isinstance(gpus, str) or not request.rdma:
        return gpus
    nics = pick_nics(
        node, usage, request.rdma, [node.gpus[node.gpu_index[g.minor]] for g in gpus], request.joint
    )
    if isinstance(nics, str):
        return nics
    return gpus + nics


def _plan_accelerators(
    node: NodeDevices, usage: DeviceUsage, request: DeviceRequest, scoring: n.Scoring
) -> tuple[AllocatedDevice, ...] | str:
    """The GPU, NPU or MLU part of the request (type gpu in the Device CR), () if none."""
    if request.fpga:
        return ERR_FPGA
    if request.npu is not None:
        return _plan_npu(node, usage, request, scoring)
    if request.gpu is None:
        return ()
    shape = request.gpu
    if request.isolation and not shape.whole and request.isolation != node.isolation_provider:
        return ERR_ISOLATION_PROVIDER
    if node.vendor == n.VENDOR_CAMBRICON:
        if shape.count != 1 or shape.whole or not shape.memory:
            return "Cambricon cards are shared as dynamic sMLU only (one card, gpu-memory)"
        return _plan_mlu(node, usage, shape.core, shape.memory, scoring)
    if shape.npu_core and (node.ascend is None or shape.npu_core > node.ascend.aicore):
        return Shortage(
            f"{INSUFFICIENT_GPU}: {n.NPU_CORE}={shape.npu_core} per card on node",
            "gpu",
            INSUFFICIENT_GPU,
        )
    if node.vendor == n.VENDOR_HUAWEI and not shape.whole:
        return f"Ascend cards are shared through vNPU templates ({n.GPU_SHARED} + {n.NPU_CORE})"
    return _plan_gpus(node, usage, shape, request, scoring)


def _preference(
    node: NodeDevices, usage: DeviceUsage, scoring: n.Scoring
) -> Callable[[int], tuple[int, ...]]:
    def load(i: int) -> int:
        return usage.core[i] + usage.ratio[i]

    if scoring == "MostAllocated":
        return lambda i: (-load(i), node.gpus[i].minor)
    return lambda i: (load(i), node.gpus[i].minor)


def _plan_gpus(
    node: NodeDevices,
    usage: DeviceUsage,
    shape: GPUShape,
    request: DeviceRequest,
    scoring: n.Scoring,
) -> tuple[AllocatedDevice, ...] | str:
    if not node.gpus:
        return "node has no GPU"
    refused = _partition_refusal(node, shape, request)
    if refused:
        return refused
    needs = [_card_need(card, shape) for card in node.gpus]
    candidates = [
        i
        for i, card in enumerate(node.gpus)
        if card.health and (need := needs[i]) is not None and _fits(usage, i, card, need)
    ]
    if request.joint:
        # Only cards whose PCIe switch still has a NIC to pair with can serve a joint request.
        reachable = nics_available(node, usage, request.rdma)
        candidates = [i for i in candidates if pcie_key(node.gpus[i]) in reachable]
    if len(candidates) < shape.count:
        return _shortage(node, shape, len(candidates))
    chosen = _choose_cards(node, usage, shape, candidates, scoring, request.partition)
    if isinstance(chosen, str):
        return chosen
    return tuple(
        _held_gpu(node, i, needs[i], shape.npu_core)
        for i in sorted(chosen, key=lambda i: node.gpus[i].minor)
    )


_Need = tuple[int, int, int]
"""Per card: (core percent, memory bytes, memory percent)."""


def _honours_partitions(node: NodeDevices, request: DeviceRequest | str) -> bool:
    """Whether the partition table binds: the node's Honor policy, or the pod's partition spec
    (`request` may be just that spec)."""
    spec = request if isinstance(request, str) else request.partition
    return node.partition_policy == "Honor" or bool(spec)


def _partition_refusal(node: NodeDevices, shape: GPUShape, request: DeviceRequest) -> str:
    """Koordinator's `allocateByPartition` refusals when partitions bind ("" when none)."""
    if not shape.whole or not _honours_partitions(node, request):
        return ""
    if node.partitions is None:
        return ERR_MISSING_PARTITION_TABLE
    if not node.partitions.get(shape.count):
        return ERR_UNSUPPORTED_GPU_COUNT
    return ""


def _card_need(card: Device, shape: GPUShape) -> _Need | None:
    if shape.whole:
        return (shape.core, card.memory, n.FULL)
    if shape.memory:
        if card.memory <= 0:
            return None  # a byte request cannot be judged on a card of unknown size
        return (shape.core, shape.memory, math.ceil(shape.memory * n.FULL / card.memory))
    return (shape.core, card.memory * shape.ratio // n.FULL, shape.ratio)


def _fits(usage: DeviceUsage, i: int, card: Device, need: _Need) -> bool:
    core, memory, ratio = need
    if ratio == n.FULL:
        # A whole card must be untouched, by GPU shares and vNPUs alike.
        return not (usage.core[i] or usage.ratio[i] or usage.memory[i] or usage.npu_core[i])
    if usage.npu_core[i]:
        return False  # a card carved into vNPUs takes no GPU shares
    return (
        usage.core[i] + core <= card.core
        and usage.ratio[i] + ratio <= card.memory_ratio
        and (card.memory == 0 or usage.memory[i] + memory <= card.memory)
    )


def _choose_cards(
    node: NodeDevices,
    usage: DeviceUsage,
    shape: GPUShape,
    candidates: list[int],
    scoring: n.Scoring,
    spec: str = "",
) -> list[int] | str:
    if shape.whole and node.partitions is not None:
        minors = [node.gpus[i].minor for i in candidates]
        restricted = spec == n.PARTITION_RESTRICTED
        partition = choose_partition(node.partitions, shape.count, minors, restricted)
        if partition is not None:
            return [node.gpu_index[m] for m in partition]
        if _honours_partitions(node, spec):
            return ERR_INSUFFICIENT_PARTITIONED
    if not shape.whole and shape.count == 1:
        # A share goes wherever the scoring strategy says; scopes only matter for whole cards.
        return [min(candidates, key=_preference(node, usage, scoring))]
    chosen = pick_cards(
        node.gpus,
        candidates,
        shape.count,
        _preference(node, usage, scoring),
        lambda i: bool(usage.core[i] or usage.ratio[i]),
    )
    return chosen if chosen is not None else _shortage(node, shape, len(candidates))


def _shortage(node: NodeDevices, shape: GPUShape, available: int) -> str:
    what = "free whole" if shape.whole else "fitting"
    return Shortage(
        f"{INSUFFICIENT_GPU}: {shape.count} needed, {available} {what} of {len(node.gpus)} on node",
        "gpu",
        INSUFFICIENT_GPU,
        needed=shape.count,
        free=available,
        cards=len(node.gpus),
    )


def _held_gpu(node: NodeDevices, i: int, need: _Need | None, npu_core: int) -> AllocatedDevice:
    assert need is not None
    card = node.gpus[i]
    core, memory, ratio = need
    return AllocatedDevice(
        "gpu", card.minor, core=core, memory=memory, memory_ratio=ratio, npu_core=npu_core
    )


def _plan_npu(
    node: NodeDevices, usage: DeviceUsage, request: DeviceRequest, scoring: n.Scoring
) -> tuple[AllocatedDevice, ...] | str:
    assert request.npu is not None
    profile = node.ascend
    if not node.gpus:
        return "node has no Ascend NPU"
    if profile is None:
        return ERR_NO_MATCHED_TEMPLATE  # no templates for this node's vendor and model
    template = match_npu_request(profile, request.npu)
    if isinstance(template, str):
        return template

    def ratio_of(card: Device) -> int:
        if template.memory_ratio or card.memory <= 0:
            return template.memory_ratio
        return math.ceil(template.memory * n.FULL / card.memory)

    candidates = [
        i
        for i, card in enumerate(node.gpus)
        if card.health
        and usage.npu_core[i] + template.aicore <= profile.aicore
        and usage.npu_cpu[i] + template.aicpu <= profile.aicpu
        and usage.dvpp[i] + template.dvpp <= n.FULL
        and usage.ratio[i] + ratio_of(card) <= card.memory_ratio
        and usage.core[i] < n.FULL
    ]
    if not candidates:
        return f"no Ascend card has room for vNPU template {template.name}"
    i = min(candidates, key=_preference(node, usage, scoring))
    card = node.gpus[i]
    held = AllocatedDevice(
        "gpu",
        card.minor,
        memory=request.npu.memory,
        memory_ratio=ratio_of(card),
        npu_core=template.aicore,
        npu_cpu=template.aicpu,
        dvpp=template.dvpp,
        template=template.name,
    )
    return (held,)


def _plan_mlu(
    node: NodeDevices, usage: DeviceUsage, vcore: int, memory: int, scoring: n.Scoring
) -> tuple[AllocatedDevice, ...] | str:
    if node.vendor != n.VENDOR_CAMBRICON or not node.gpus:
        return "node has no Cambricon MLU"
    if memory < n.MLU_MEMORY_BLOCK:
        return "a Cambricon sMLU needs at least 256Mi of memory"
    # The device plugin hands out memory in 256Mi blocks: account for what the pod really gets.
    memory = math.ceil(memory / n.MLU_MEMORY_BLOCK) * n.MLU_MEMORY_BLOCK
    candidates = [
        i
        for i, card in enumerate(node.gpus)
        if card.health
        and usage.core[i] + vcore <= card.core
        and usage.memory[i] + memory <= card.memory
    ]
    if not candidates:
        return f"no Cambricon card has {vcore}% cores and {memory} bytes free"
    i = min(candidates, key=_preference(node, usage, scoring))
    card = node.gpus[i]
    ratio = memory * n.FULL // card.memory
    return (AllocatedDevice("gpu", card.minor, core=vcore, memory=memory, memory_ratio=ratio),)
