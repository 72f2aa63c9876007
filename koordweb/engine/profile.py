"""How koordweb runs the engine: the profile, and device rows -> the devices plugin's node state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings

from koordweb.manifests import ManifestError, load_documents
from koordweb.models import Cluster, DeviceTemplateConfig
from scheduler.api import (
    Device,
    DeviceTopology,
    NodeDevices,
    Profile,
    TemplateConfig,
    VirtualFunction,
    build_node_devices,
)
from scheduler.vocabulary import GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, RDMA


def engine_profile(cluster: Cluster) -> Profile:
    """The default profile (Koordinator's reference behaviour) with the cluster's plugin
    arguments and the plugins it enables (registered by entry point or by the setting
    KOORDWEB_SCHEDULER_PLUGINS); a stored configuration that no longer validates raises
    `ProfileError`, naming what is wrong, and the round fails with it."""
    return Profile.configured(cluster.scheduler_args or {}, settings.KOORDWEB_SCHEDULER_PLUGINS)


def device_from_row(row: Any) -> Device:
    resources = row.resources or {}
    return Device(
        type=row.device_type,  # type: ignore[arg-type]
        minor=row.minor,
        vendor=row.vendor,
        model=row.model,
        health=row.health,
        core=int(resources.get(GPU_CORE, 100)),
        memory=int(resources.get(GPU_MEMORY, 0)),
        memory_ratio=int(resources.get(GPU_MEMORY_RATIO, 100)),
        rdma=int(resources.get(RDMA, 100)),
        topology=DeviceTopology(
            socket_id=row.socket_id if row.socket_id is not None else -1,
            numa_node=row.numa_node if row.numa_node is not None else -1,
            pcie_id=row.pcie_id,
            bus_id=row.bus_id,
        ),
        vfs=tuple(
            VirtualFunction(minor=int(vf.get("minor", i)), bus_id=str(vf.get("busID", "")))
            for i, vf in enumerate(_flat_vfs(row.vfs or []))
        ),
        uuid=row.uuid,
    )


def _flat_vfs(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """VFs stored flat ([{minor, busID}]) or as the CR's vfGroups ([{vfs: [...]}])."""
    flat: list[dict[str, Any]] = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("vfs"), list):
            flat.extend(vf for vf in entry["vfs"] if isinstance(vf, dict))
        elif isinstance(entry, dict):
            flat.append(entry)
    return flat


def template_config(cluster: Cluster) -> TemplateConfig:
    """Vendor templates from the cluster's template ConfigMaps: "<vendor>-<model>" -> templates.

    Each data value is YAML (read with the safe manifest loader); entries keyed like
    `huawei-Ascend-910B3` override the built-in vNPU templates of that model.
    """
    merged: dict[str, dict[str, dict[str, object]]] = {}
    for config in DeviceTemplateConfig.objects.filter(cluster=cluster).order_by("name"):
        for raw in (config.data or {}).values():
            try:
                documents = load_documents(raw)
            except ManifestError:
                continue
            for doc in documents:
                if not isinstance(doc, dict):
                    continue
                for key, templates in doc.items():
                    if isinstance(key, str) and "-" in key and isinstance(templates, dict):
                        merged.setdefault(key, {}).update(
                            {str(k): v for k, v in templates.items() if isinstance(v, dict)}
                        )
    return merged


def node_devices_builder(
    cluster: Cluster,
) -> Callable[[Any, Sequence[Any]], NodeDevices | None]:
    """A function (node row, device rows) -> the devices plugin's state; None without devices.

    Rows are model instances or the snapshot's plain rows (`NodeRow`, `DeviceRow`): the same
    attribute names."""
    templates = template_config(cluster)

    def node_devices(node: Any, rows: Sequence[Any]) -> NodeDevices | None:
        if not rows:
            return None
        return build_node_devices(
            node.name,
            [device_from_row(r) for r in rows],
            labels=node.labels,
            device_annotations=node.device_annotations,
            template_config=templates or None,
            device_labels=node.device_labels,
        )

    return node_devices
