"""Device types: a node's cards and NICs (frozen), what a pod was given (frozen), per-node usage.

Units are integers: `core` and `memory_ratio` in percent of a card (a whole card is 100), memory
in bytes, Ascend AI cores and AI CPUs as counts, DVPP in percent, RDMA in Koordinator's
`koordinator.sh/rdma` units (a whole NIC is 100). `DeviceUsage` is the only mutable type: the
allocator reads it and the caller applies the allocations it accepts, so a card in use is never
handed out twice.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.devices.names import FULL, DeviceType, PartitionPolicy


@dataclass(frozen=True, slots=True)
class VirtualFunction:
    """An SR-IOV virtual function of an RDMA NIC."""

    minor: int
    bus_id: str


@dataclass(frozen=True, slots=True)
class DeviceTopology:
    """Where a device sits: socket, NUMA node, PCIe switch, bus id (-1 / "" when unknown)."""

    socket_id: int = -1
    numa_node: int = -1
    pcie_id: str = ""
    bus_id: str = ""


@dataclass(frozen=True, slots=True)
class Device:
    """One entry of a Koordinator `Device` CR; NPUs and MLUs are type gpu with a vendor."""

    type: DeviceType
    minor: int
    vendor: str = ""
    model: str = ""
    health: bool = True
    core: int = FULL
    memory: int = 0
    memory_ratio: int = FULL
    rdma: int = FULL
    topology: DeviceTopology = DeviceTopology()
    vfs: tuple[VirtualFunction, ...] = ()
    uuid: str = ""


@dataclass(frozen=True, slots=True)
class GPUPartition:
    """A set of cards NVLink/HCCS lets a pod hold together; higher allocation score is better."""

    minors: tuple[int, ...]
    link_type: str = "NVLink"
    allocation_score: int = 1


PartitionTable = Mapping[int, tuple[GPUPartition, ...]]
"""Number of cards -> the partitions of that size."""


@dataclass(frozen=True, slots=True)
class VnpuTemplate:
    """An Ascend vNPU template: AI cores, AI CPUs, DVPP percent (0: none), memory bytes and percent.

    A vNPU request matches it when its per-card resources are exactly these (Koordinator's strict
    `findMatchedTemplates`): `huawei.com/npu-core`, `npu-cpu`, `npu-dvpp` when non-zero, and
    `koordinator.sh/gpu-memory`.
    """

    name: str
    aicore: int
    aicpu: int
    dvpp: int
    memory_ratio: int
    memory: int = 0


@dataclass(frozen=True, slots=True)
class AscendProfile:
    """An Ascend card model: its whole-card AI cores and AI CPUs and the vNPU templates it has."""

    model: str
    aicore: int
    aicpu: int
    templates: tuple[VnpuTemplate, ...]


@dataclass(frozen=True)
class NodeDevices:
    """A node's devices, partition table and vendor profile, as one round sees them."""

    node: str
    gpus: tuple[Device, ...] = ()
    rdmas: tuple[Device, ...] = ()
    fpgas: tuple[Device, ...] = ()
    vendor: str = ""
    model: str = ""
    partitions: PartitionTable | None = None
    partition_policy: PartitionPolicy = "Prefer"
    ascend: AscendProfile | None = None
    isolation_provider: str = ""  # the Node's koordinator.sh/gpu-isolation-provider label
    gpu_index: Mapping[int, int] = field(init=False, repr=False, compare=False)
    rdma_index: Mapping[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Positions by minor let usage live in flat lists instead of dicts per card.
        object.__setattr__(self, "gpu_index", {d.minor: i for i, d in enumerate(self.gpus)})
        object.__setattr__(self, "rdma_index", {d.minor: i for i, d in enumerate(self.rdmas)})

    @property
    def has_devices(self) -> bool:
        return bool(self.gpus or self.rdmas or self.fpgas)

    def renamed(self, node: str) -> NodeDevices:
        """The same devices on another node (equal to `replace(self, node=node)`); the indexes
        by minor, never changed, are shared rather than built again: a round renames one
        template for thousands of nodes."""
        twin = copy.copy(self)
        object.__setattr__(twin, "node", node)
        return twin


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """What one pod holds of one device."""

    type: DeviceType
    minor: int
    core: int = 0
    memory: int = 0
    memory_ratio: int = 0
    npu_core: int = 0
    npu_cpu: int = 0
    dvpp: int = 0
    rdma: int = 0
    vfs: tuple[VirtualFunction, ...] = ()
    template: str = ""


class DeviceUsage:
    """What running and assumed pods hold of a node's devices; mutable, copied per what-if."""

    __slots__ = ("core", "dvpp", "memory", "node", "npu_core", "npu_cpu", "ratio", "rdma", "vfs")

    def __init__(self, node: NodeDevices) -> None:
        count = len(node.gpus)
        self.node = node
        self.core = [0] * count
        self.memory = [0] * count
        self.ratio = [0] * count
        self.npu_core = [0] * count
        self.npu_cpu = [0] * count
        self.dvpp = [0] * count
        self.rdma = [0] * len(node.rdmas)
        self.vfs: list[set[int]] = [set() for _ in node.rdmas]

    def copy(self) -> DeviceUsage:
        clone = DeviceUsage.__new__(DeviceUsage)
        clone.node = self.node
        clone.core = list(self.core)
        clone.memory = list(self.memory)
        clone.ratio = list(self.ratio)
        clone.npu_core = list(self.npu_core)
        clone.npu_cpu = list(self.npu_cpu)
        clone.dvpp = list(self.dvpp)
        clone.rdma = list(self.rdma)
        clone.vfs = [set(used) for used in self.vfs]
        return clone

    def apply(self, devices: Iterable[AllocatedDevice]) -> None:
        """Take `devices` (an accepted allocation, or a running pod's annotation)."""
        self._add(devices, 1)

    def release(self, devices: Iterable[AllocatedDevice]) -> None:
        """Give `devices` back (a pod finished, was preempted or was un-assumed)."""
        self._add(devices, -1)

    def _add(self, devices: Iterable[AllocatedDevice], sign: int) -> None:
        for held in devices:
            if held.type == "gpu":
                i = self.node.gpu_index.get(held.minor)
                if i is None:
                    continue  # the card left the Device CR: nothing to account against
                self.core[i] += sign * held.core
                self.memory[i] += sign * held.memory
                self.ratio[i] += sign * held.memory_ratio
                self.npu_core[i] += sign * held.npu_core
                self.npu_cpu[i] += sign * held.npu_cpu
                self.dvpp[i] += sign * held.dvpp
            elif held.type == "rdma":
                j = self.node.rdma_index.get(held.minor)
                if j is None:
                    continue
                self.rdma[j] += sign * held.rdma
                for vf in held.vfs:
                    if sign > 0:
                        self.vfs[j].add(vf.minor)
                    else:
                        self.vfs[j].discard(vf.minor)


class Shortage(str):
    """A refusal that is a shortage of one device type, in the allocator's words (a `str`, as
    every refusal is) with what it lacks as data: the device type (`resource`: gpu, rdma, fpga),
    kube-scheduler's words nodes are counted under (`counted`: "Insufficient gpu") and, when the
    allocator counted them, the cards it `needed`, those that were `free` and the node's `cards`
    (-1: not counted)."""

    resource: DeviceType
    counted: str
    needed: int
    free: int
    cards: int

    def __new__(
        cls,
        text: str,
        resource: DeviceType,
        counted: str = "",
        *,
        needed: int = -1,
        free: int = -1,
        cards: int = -1,
    ) -> Shortage:
        made = super().__new__(cls, text)
        made.resource, made.counted = resource, counted or text
        made.needed, made.free, made.cards = needed, free, cards
        return made
