"""How koordweb runs the engine: the profile, and device rows -> the devices plugin's node state."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from koordweb.models import Device as DeviceRow
from koordweb.models import Node
from scheduler.devices import Device, NodeDevices, build_node_devices
from scheduler.devices.model import DeviceTopology, VirtualFunction
from scheduler.profile import Profile

CORE = "koordinator.sh/gpu-core"
MEMORY = "koordinator.sh/gpu-memory"
RATIO = "koordinator.sh/gpu-memory-ratio"
RDMA = "koordinator.sh/rdma"


def engine_profile() -> Profile:
    """The default profile (Koordinator's reference behaviour plus the optional plugins present)."""
    return Profile.default()


def device_from_row(row: DeviceRow) -> Device:
    resources = row.resources or {}
    return Device(
        type=row.device_type,  # type: ignore[arg-type]
        minor=row.minor,
        vendor=row.vendor,
        model=row.model,
        health=row.health,
        core=int(resources.get(CORE, 100)),
        memory=int(resources.get(MEMORY, 0)),
        memory_ratio=int(resources.get(RATIO, 100)),
        rdma=int(resources.get(RDMA, 100)),
        topology=DeviceTopology(
            socket_id=row.socket_id if row.socket_id is not None else -1,
            numa_node=row.numa_node if row.numa_node is not None else -1,
            pcie_id=row.pcie_id,
            bus_id=row.bus_id,
        ),
        vfs=tuple(
            VirtualFunction(minor=int(vf.get("minor", i)), bus_id=str(vf.get("busID", "")))
            for i, vf in enumerate(row.vfs or [])
        ),
        uuid=row.uuid,
    )


def node_devices(node: Node, rows: Sequence[DeviceRow]) -> NodeDevices | None:
    """A node's devices as the allocator sees them; None for a node without devices."""
    if not rows:
        return None
    return build_node_devices(
        node.name,
        [device_from_row(r) for r in rows],
        labels=node.labels,
        device_annotations=node.annotations,
    )


def node_devices_builder() -> Callable[[Node, Sequence[DeviceRow]], NodeDevices | None]:
    return node_devices
