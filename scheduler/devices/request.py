"""A pod's device request: parsing Koordinator's whitelisted resource combinations into shapes.

`validate_device_request` is what the API and the manifest importer call at submission: it returns
one clear message per problem, so a bad request is refused before it can sit pending forever.
`parse_device_request` turns a valid request into a `DeviceRequest` the allocator understands
(per-card amounts), or None when the pod asks for no device at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.devices import names as n
from scheduler.devices.quantity import to_int

# Resource-name prefixes that belong to devices: a name under them outside the whitelist is a typo.
_DEVICE_PREFIXES = ("koordinator.sh/gpu", "huawei.com/npu", "cambricon.com/mlu")


class DeviceRequestError(ValueError):
    """An invalid device request; `messages` lists every problem found."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


@dataclass(frozen=True, slots=True)
class GPUShape:
    """`count` cards, each giving `core` percent and `memory` bytes or `ratio` percent."""

    count: int
    core: int
    memory: int = 0
    ratio: int = 0

    @property
    def whole(self) -> bool:
        """Whole cards: all of each card's cores and memory."""
        return self.core == n.FULL and self.ratio == n.FULL


@dataclass(frozen=True, slots=True)
class NPUShape:
    """An Ascend request in AI cores; cpu and dvpp narrow the vNPU template when given."""

    core: int
    cpu: int | None = None
    dvpp: int | None = None


@dataclass(frozen=True, slots=True)
class MLUShape:
    """A Cambricon dynamic sMLU slice: core percent and memory bytes on one card."""

    vcore: int
    memory: int


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """What one pod needs of a node's devices; `joint` asks for RDMA on the GPUs' PCIe switches."""

    gpu: GPUShape | None = None
    npu: NPUShape | None = None
    mlu: MLUShape | None = None
    rdma: int = 0
    joint: bool = False


def validate_device_request(
    requests: Mapping[str, object], annotations: Mapping[str, str] | None = None
) -> list[str]:
    """Every problem with a pod's device resources and joint-allocation annotation ([] if fine)."""
    try:
        parse_device_request(requests, annotations)
    except DeviceRequestError as error:
        return error.messages
    return []


def parse_device_request(
    requests: Mapping[str, object], annotations: Mapping[str, str] | None = None
) -> DeviceRequest | None:
    """The pod's device request, None if it asks for no device; raises DeviceRequestError."""
    errors: list[str] = []
    amounts: dict[str, int] = {}
    for name, raw in requests.items():
        if name not in n.DEVICE_RESOURCES:
            if name.startswith(_DEVICE_PREFIXES):
                errors.append(f"unknown device resource {name}")
            continue
        try:
            value = to_int(raw)
        except ValueError:
            errors.append(f"{name} must be a non-negative integer, got {raw!r}")
            continue
        if value > 0:
            amounts[name] = value
    joint = _parse_joint(annotations or {}, errors)
    request = _shape(amounts, joint, errors) if not errors else None
    if errors:
        raise DeviceRequestError(errors)
    return request


def _shape(amounts: dict[str, int], joint: bool, errors: list[str]) -> DeviceRequest | None:
    gpu_names = sorted(n.GPU_RESOURCES & amounts.keys())
    npu_names = sorted(n.NPU_RESOURCES & amounts.keys())
    mlu_names = sorted(n.MLU_RESOURCES & amounts.keys())
    kinds = [names for names in (gpu_names, npu_names, mlu_names) if names]
    if len(kinds) > 1:
        errors.append(
            "a pod asks for one kind of accelerator: "
            + " cannot be combined with ".join(", ".join(names) for names in kinds)
        )
        return None
    gpu = _gpu_shape(amounts, errors) if gpu_names else None
    npu = _npu_shape(amounts, errors) if npu_names else None
    mlu = _mlu_shape(amounts, errors) if mlu_names else None
    rdma = amounts.get(n.RDMA, 0)
    if rdma > n.FULL and rdma % n.FULL:
        errors.append(f"{n.RDMA} above {n.FULL} must be a multiple of {n.FULL} (whole NICs)")
    if joint:
        if gpu is None or not rdma:
            errors.append(f"{n.ANNOTATION_JOINT_ALLOCATE} needs both a GPU request and {n.RDMA}")
        elif rdma > n.FULL:
            errors.append(f"joint GPU+RDMA allocation takes at most {n.FULL} {n.RDMA} per NIC")
    if errors:
        return None
    if gpu is None and npu is None and mlu is None and not rdma:
        return None
    return DeviceRequest(gpu=gpu, npu=npu, mlu=mlu, rdma=rdma, joint=joint)


def _gpu_shape(amounts: dict[str, int], errors: list[str]) -> GPUShape | None:
    whole = amounts.get(n.NVIDIA_GPU, 0)
    percent = amounts.get(n.KOORD_GPU, 0)
    if percent:
        others = sorted(n.GPU_RESOURCES - {n.KOORD_GPU} & amounts.keys())
        if others:
            errors.append(f"{n.KOORD_GPU} cannot be combined with {', '.join(others)}")
            return None
        # The same as equal gpu-core and gpu-memory-ratio.
        amounts = {**amounts, n.GPU_CORE: percent, n.GPU_MEMORY_RATIO: percent}
    core = amounts.get(n.GPU_CORE, 0)
    memory = amounts.get(n.GPU_MEMORY, 0)
    ratio = amounts.get(n.GPU_MEMORY_RATIO, 0)
    shared = amounts.get(n.GPU_SHARED, 0)
    if whole:
        others = sorted(n.GPU_RESOURCES - {n.NVIDIA_GPU} & amounts.keys())
        if others:
            errors.append(f"{n.NVIDIA_GPU} cannot be combined with {', '.join(others)}")
            return None
        return GPUShape(count=whole, core=n.FULL, ratio=n.FULL)
    if memory and ratio:
        errors.append(f"ask for {n.GPU_MEMORY} or {n.GPU_MEMORY_RATIO}, not both")
        return None
    if not memory and not ratio:
        errors.append(f"a GPU share needs {n.GPU_MEMORY} or {n.GPU_MEMORY_RATIO}")
        return None
    if shared:
        return _shared_shape(shared, core, memory, ratio, errors)
    if core > n.FULL or ratio > n.FULL:
        # Several whole cards: Koordinator wants equal multiples of 100 for cores and memory.
        if memory or core % n.FULL or (core and ratio != core) or ratio % n.FULL:
            errors.append(
                f"more than one card needs {n.GPU_CORE} and {n.GPU_MEMORY_RATIO} equal multiples"
                f" of {n.FULL} (got core {core}, ratio {ratio or '-'}, memory {memory or '-'})"
            )
            return None
        return GPUShape(count=ratio // n.FULL, core=n.FULL, ratio=n.FULL)
    return GPUShape(count=1, core=core, memory=memory, ratio=ratio)


def _shared_shape(
    shared: int, core: int, memory: int, ratio: int, errors: list[str]
) -> GPUShape | None:
    # gpu.shared spreads the requested totals evenly over that many cards.
    uneven = [
        name
        for name, total in ((n.GPU_CORE, core), (n.GPU_MEMORY, memory), (n.GPU_MEMORY_RATIO, ratio))
        if total % shared
    ]
    if uneven:
        errors.append(f"{', '.join(uneven)} must divide evenly over {n.GPU_SHARED}={shared} cards")
        return None
    if core // shared > n.FULL or ratio // shared > n.FULL:
        errors.append(f"each of the {n.GPU_SHARED}={shared} cards can give at most {n.FULL}%")
        return None
    return GPUShape(
        count=shared, core=core // shared, memory=memory // shared, ratio=ratio // shared
    )


def _npu_shape(amounts: dict[str, int], errors: list[str]) -> NPUShape | None:
    core = amounts.get(n.NPU_CORE, 0)
    if not core:
        errors.append(f"{n.NPU_CPU} and {n.NPU_DVPP} need {n.NPU_CORE}")
        return None
    dvpp = amounts.get(n.NPU_DVPP)
    if dvpp is not None and dvpp > n.FULL:
        errors.append(f"{n.NPU_DVPP} is a percentage of one card (at most {n.FULL})")
        return None
    return NPUShape(core=core, cpu=amounts.get(n.NPU_CPU), dvpp=dvpp)


def _mlu_shape(amounts: dict[str, int], errors: list[str]) -> MLUShape | None:
    vcore = amounts.get(n.MLU_VCORE, 0)
    memory = amounts.get(n.MLU_VMEMORY, 0)
    if not vcore or not memory:
        errors.append(f"a Cambricon sMLU needs both {n.MLU_VCORE} and {n.MLU_VMEMORY}")
        return None
    if vcore > n.FULL:
        errors.append(f"{n.MLU_VCORE} is a percentage of one card (at most {n.FULL})")
        return None
    if memory < n.MLU_MEMORY_BLOCK:
        errors.append(f"{n.MLU_VMEMORY} must be at least 256Mi")
        return None
    return MLUShape(vcore=vcore, memory=memory)


def _parse_joint(annotations: Mapping[str, str], errors: list[str]) -> bool:
    raw = annotations.get(n.ANNOTATION_JOINT_ALLOCATE)
    if not raw:
        return False
    try:
        spec = json.loads(raw)
    except ValueError:
        errors.append(f"{n.ANNOTATION_JOINT_ALLOCATE} is not valid JSON")
        return False
    if not isinstance(spec, dict):
        errors.append(f"{n.ANNOTATION_JOINT_ALLOCATE} must be a JSON object")
        return False
    types = spec.get("deviceTypes")
    if not isinstance(types, list) or set(types) != {"gpu", "rdma"}:
        errors.append(f'{n.ANNOTATION_JOINT_ALLOCATE} deviceTypes must be ["gpu","rdma"]')
    scope = spec.get("requiredScope", n.JOINT_SCOPE_SAME_PCIE)
    if scope not in ("", n.JOINT_SCOPE_SAME_PCIE):
        errors.append(
            f"{n.ANNOTATION_JOINT_ALLOCATE} requiredScope {scope!r} is not supported"
            f" (only {n.JOINT_SCOPE_SAME_PCIE})"
        )
    return True
