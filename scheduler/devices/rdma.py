"""RDMA NICs: which NICs a pod gets, alone or jointly with its GPUs on the same PCIe switches.

A request of at most 100 `koordinator.sh/rdma` takes that share of one NIC and, when the NIC has
SR-IOV virtual functions, its first free VF; a larger request (a multiple of 100) takes whole NICs.
Joint GPU+RDMA allocation (`requiredScope: SamePCIe`) gives one NIC per PCIe switch of the chosen
GPUs, so GPUDirect traffic never crosses the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.devices.model import AllocatedDevice, Device, DeviceUsage, NodeDevices, Shortage
from scheduler.devices.names import FULL
from scheduler.devices.topology import ScopeKey, pcie_key


def _has_room(nic: Device, usage: DeviceUsage, j: int, share: int) -> bool:
    if not nic.health or usage.rdma[j] + share > nic.rdma:
        return False
    return not nic.vfs or len(usage.vfs[j]) < len(nic.vfs)


def nics_available(node: NodeDevices, usage: DeviceUsage, share: int) -> set[ScopeKey]:
    """The PCIe switches that still have a NIC with room for `share`."""
    return {pcie_key(nic) for j, nic in enumerate(node.rdmas) if _has_room(nic, usage, j, share)}


def pick_nics(
    node: NodeDevices,
    usage: DeviceUsage,
    rdma: int,
    gpus: Sequence[Device],
    joint: bool,
) -> tuple[AllocatedDevice, ...] | str:
    """The NICs (with VFs) for a pod asking `rdma`, near `gpus`; or why there are none."""
    if not node.rdmas:
        return "node has no RDMA NIC"
    if joint:
        return _joint(node, usage, rdma, gpus)
    count, share = (1, rdma) if rdma <= FULL else (rdma // FULL, FULL)
    near_pcie = {pcie_key(g) for g in gpus}
    near_numa = {g.topology.numa_node for g in gpus}
    candidates = [
        j
        for j, nic in enumerate(node.rdmas)
        if _has_room(nic, usage, j, share) and (share < FULL or not usage.rdma[j])
    ]
    if len(candidates) < count:
        return Shortage(
            f"Insufficient rdma: {count} NICs with {share} free needed, {len(candidates)} found",
            "rdma",
            "Insufficient rdma",
            needed=count,
            free=len(candidates),
            cards=len(node.rdmas),
        )

    def preference(j: int) -> tuple[bool, bool, int, int]:
        nic = node.rdmas[j]
        return (
            pcie_key(nic) not in near_pcie,
            nic.topology.numa_node not in near_numa,
            usage.rdma[j],
            nic.minor,
        )

    chosen = sorted(sorted(candidates, key=preference)[:count], key=lambda j: node.rdmas[j].minor)
    return tuple(_held(node, usage, j, share) for j in chosen)


def _joint(
    node: NodeDevices, usage: DeviceUsage, share: int, gpus: Sequence[Device]
) -> tuple[AllocatedDevice, ...] | str:
    held: list[AllocatedDevice] = []
    for scope in sorted({pcie_key(g) for g in gpus}):
        options = [
            j
            for j, nic in enumerate(node.rdmas)
            if pcie_key(nic) == scope and _has_room(nic, usage, j, share)
        ]
        if not options:
            return f"no RDMA NIC with room on PCIe switch {scope[1] or '?'} of the chosen GPUs"
        best = min(options, key=lambda j: (usage.rdma[j], node.rdmas[j].minor))
        held.append(_held(node, usage, best, share))
    return tuple(sorted(held, key=lambda d: d.minor))


def _held(node: NodeDevices, usage: DeviceUsage, j: int, share: int) -> AllocatedDevice:
    nic = node.rdmas[j]
    free_vfs = [
        vf for vf in sorted(nic.vfs, key=lambda vf: vf.minor) if vf.minor not in usage.vfs[j]
    ]
    vfs = (free_vfs[0],) if free_vfs else ()
    return AllocatedDevice("rdma", nic.minor, rdma=share, vfs=vfs)
