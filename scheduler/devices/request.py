"""A pod's device request: Koordinator's valid resource combinations, turned into per-card shapes.

The vocabulary is exactly Koordinator v1.7's (pkg/scheduler/plugins/deviceshare/utils.go): the
pod's device resources are split by device type (gpu, rdma, fpga), each type's set of names must be
one of `VALID_GPU_COMBINATIONS` (or the single rdma / fpga name), and the amounts are converted the
way `ResourceCombinationsMapper` and `calcDesiredRequestsAndCountForGPU` do: whole cards of
nvidia.com/gpu, amd.com/gpu or dcu.com/gpu become 100 percent of cores and memory each,
`koordinator.sh/gpu` is cores and memory ratio at once, the number of cards is `gpu.shared` (else
memory ratio / 100 when it is a multiple above 100), and every amount is divided per card.
A refused request carries Koordinator's own reason text ("invalid resource device requests: [...]",
"invalid resource unit ...").

`validate_device_request` is what the API calls at submission; `parse_device_request` gives the
allocator a `DeviceRequest`, or None when the pod asks for no device at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

from scheduler.devices import names as n
from scheduler.devices.quantity import to_int

_SHARED_GPU = frozenset({n.GPU_SHARED})
_VNPU = frozenset({n.GPU_SHARED, n.NPU_CORE, n.NPU_CPU, n.GPU_MEMORY})
VALID_GPU_COMBINATIONS: frozenset[frozenset[str]] = frozenset(
    frozenset(names)
    for names in (
        {n.NVIDIA_GPU},
        {n.AMD_GPU},
        {n.HYGON_DCU},
        {n.KOORD_GPU},
        {n.GPU_MEMORY},
        {n.GPU_MEMORY_RATIO},
        {n.GPU_CORE, n.GPU_MEMORY},
        {n.GPU_CORE, n.GPU_MEMORY_RATIO},
        {n.NPU_CORE, n.GPU_MEMORY_RATIO},
        {n.GPU_SHARED, n.GPU_MEMORY},
        {n.GPU_SHARED, n.GPU_MEMORY_RATIO},
        {n.GPU_SHARED, n.GPU_CORE, n.GPU_MEMORY},
        {n.GPU_SHARED, n.GPU_CORE, n.GPU_MEMORY_RATIO},
        _VNPU,
        _VNPU | {n.NPU_DVPP},
    )
)
"""Koordinator's `ValidDeviceResourceCombinations` for device type gpu, as sets of names."""

# Resources that are percentages of one device: above 100 they must be whole devices.
_PERCENT_UNITS = (n.KOORD_GPU, n.RDMA, n.FPGA)


class DeviceRequestError(ValueError):
    """An invalid device request; `messages` lists every problem found."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


@dataclass(frozen=True, slots=True)
class GPUShape:
    """`count` cards, each giving `core` percent and `memory` bytes or `ratio` percent.

    `npu_core` is set for whole Ascend cards (`huawei.com/npu-core` + `gpu-memory-ratio`).
    """

    count: int
    core: int
    memory: int = 0
    ratio: int = 0
    npu_core: int = 0

    @property
    def whole(self) -> bool:
        """Not shared in Koordinator's sense: a whole card's memory (ratio 100, no byte amount)."""
        return not self.memory and self.ratio >= n.FULL


@dataclass(frozen=True, slots=True)
class NPUShape:
    """An Ascend vNPU on one card: AI cores, AI CPUs, DVPP percent (None: not asked), bytes."""

    core: int
    cpu: int
    dvpp: int | None = None
    memory: int = 0


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """What one pod needs of a node's devices; `joint` asks for RDMA on the GPUs' PCIe switches.

    For a GPU request, `partition` is the pod's `gpu-partition-spec` allocate policy ("" when it
    has none; `BestEffort` or `Restricted`: honour the node's partition table whatever the node's
    policy), and `isolation` its `koordinator.sh/gpu-isolation-provider` label (a shared GPU
    then needs a node with the same label).
    """

    gpu: GPUShape | None = None
    npu: NPUShape | None = None
    rdma: int = 0
    fpga: int = 0
    joint: bool = False
    partition: str = ""
    isolation: str = ""


def validate_device_request(
    requests: Mapping[str, object],
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """Every problem with a pod's device resources and device annotations ([] if fine)."""
    try:
        parse_device_request(requests, annotations, labels)
    except DeviceRequestError as error:
        return error.messages
    return []


def parse_device_request(
    requests: Mapping[str, object],
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> DeviceRequest | None:
    """The pod's device request, None if it asks for no device; raises DeviceRequestError."""
    errors: list[str] = []
    amounts: dict[str, int] = {}
    for name, raw in requests.items():
        if name not in n.DEVICE_RESOURCES:
            continue
        try:
            value = to_int(raw)
        except ValueError:
            errors.append(f"{name} must be a non-negative integer, got {raw!r}")
            continue
        if value > 0:
            amounts[name] = value
    joint = _parse_joint(annotations or {}, errors)
    if not errors:
        for name in _PERCENT_UNITS:
            value = amounts.get(name, 0)
            if value > n.FULL and value % n.FULL:
                errors.append(f"invalid resource unit {name}: {value}")
    request = _request(amounts, joint, errors) if not errors else None
    if request is not None and request.gpu is not None:
        # Koordinator's parseGPURequirements reads both only for a GPU request.
        partition = _parse_partition_spec(annotations or {}, errors)
        isolation = (labels or {}).get(n.LABEL_GPU_ISOLATION_PROVIDER, "")
        if partition or isolation:
            request = replace(request, partition=partition, isolation=isolation)
    if errors:
        raise DeviceRequestError(errors)
    return request


def _parse_partition_spec(annotations: Mapping[str, str], errors: list[str]) -> str:
    """The `gpu-partition-spec` allocate policy ("" without the annotation); Koordinator's
    GetGPUPartitionSpec: an empty policy is BestEffort. `ringBusBandwidth` is not read."""
    if n.ANNOTATION_GPU_PARTITION_SPEC not in annotations:
        return ""
    raw = annotations[n.ANNOTATION_GPU_PARTITION_SPEC]
    try:
        spec = json.loads(raw)
    except ValueError as error:
        errors.append(f"invalid GPUPartitionSpec annotation, err: {error}")
        return ""
    if not isinstance(spec, dict):
        errors.append("invalid GPUPartitionSpec annotation, err: not a JSON object")
        return ""
    policy = spec.get("allocatePolicy") or n.PARTITION_BEST_EFFORT
    if not isinstance(policy, str):
        errors.append("invalid GPUPartitionSpec annotation, err: allocatePolicy is not a string")
        return ""
    return n.PARTITION_RESTRICTED if policy == n.PARTITION_RESTRICTED else n.PARTITION_BEST_EFFORT


def _request(amounts: dict[str, int], joint: bool, errors: list[str]) -> DeviceRequest | None:
    gpu_amounts = {k: v for k, v in amounts.items() if k in n.GPU_RESOURCES}
    gpu: GPUShape | None = None
    npu: NPUShape | None = None
    if gpu_amounts:
        if not _valid_gpu_combination(gpu_amounts):
            errors.append(f"invalid resource device requests: [{' '.join(sorted(gpu_amounts))}]")
            return None
        if gpu_amounts.keys() >= _VNPU:
            npu = NPUShape(
                core=gpu_amounts[n.NPU_CORE],
                cpu=gpu_amounts[n.NPU_CPU],
                dvpp=gpu_amounts.get(n.NPU_DVPP),
                memory=gpu_amounts[n.GPU_MEMORY],
            )
        else:
            gpu = _per_card(_converted(gpu_amounts))
    rdma = amounts.get(n.RDMA, 0)
    if joint:
        if gpu is None or not rdma:
            errors.append(f"{n.ANNOTATION_JOINT_ALLOCATE} needs both a GPU request and {n.RDMA}")
            return None
        if rdma > n.FULL:
            errors.append(f"joint GPU+RDMA allocation takes at most {n.FULL} {n.RDMA} per NIC")
            return None
    fpga = amounts.get(n.FPGA, 0)
    if gpu is None and npu is None and not rdma and not fpga:
        return None
    return DeviceRequest(gpu=gpu, npu=npu, rdma=rdma, fpga=fpga, joint=joint)


def _valid_gpu_combination(amounts: Mapping[str, int]) -> bool:
    """Koordinator's check: a listed combination, and its amounts in range."""
    names = frozenset(amounts)
    if names not in VALID_GPU_COMBINATIONS:
        return False
    shared = amounts.get(n.GPU_SHARED, 0)
    if n.NPU_CORE in names and shared:
        # One vNPU per pod: the device side cannot split a vNPU over cards.
        return shared == 1 and amounts.get(n.NPU_DVPP, 0) <= n.FULL
    for name in (n.GPU_CORE, n.GPU_MEMORY_RATIO):
        value = amounts.get(name)
        if value is None:
            continue
        if shared:
            if value % shared or value // shared > n.FULL:
                return False
        elif value > n.FULL and value % n.FULL:
            return False
    return True


def _converted(amounts: Mapping[str, int]) -> dict[str, int]:
    """Koordinator's `ResourceCombinationsMapper`: whole cards and gpu as core + memory ratio."""
    for name in n.WHOLE_CARD_RESOURCES:
        if name in amounts:
            return {n.GPU_CORE: amounts[name] * n.FULL, n.GPU_MEMORY_RATIO: amounts[name] * n.FULL}
    if n.KOORD_GPU in amounts:
        return {n.GPU_CORE: amounts[n.KOORD_GPU], n.GPU_MEMORY_RATIO: amounts[n.KOORD_GPU]}
    return dict(amounts)


def _per_card(amounts: Mapping[str, int]) -> GPUShape:
    """Koordinator's `calcDesiredRequestsAndCountForGPU`: the number of cards, each one's part."""
    ratio = amounts.get(n.GPU_MEMORY_RATIO, 0)
    count = amounts.get(n.GPU_SHARED, 0)
    if not count:
        count = ratio // n.FULL if ratio > n.FULL and ratio % n.FULL == 0 else 1
    return GPUShape(
        count=count,
        core=amounts.get(n.GPU_CORE, 0) // count,
        memory=0 if ratio else amounts.get(n.GPU_MEMORY, 0) // count,
        ratio=ratio // count,
        npu_core=amounts.get(n.NPU_CORE, 0) // count,
    )


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
