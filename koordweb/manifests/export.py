"""A cluster's rows -> documents, in a stable order that imports back (referenced kinds first)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import yaml

from koordweb.manifests import serialize
from koordweb.manifests.scheduler_config import scheduler_config_doc
from koordweb.manifests.topology import Layer, build_tree, detail_status
from koordweb.models import (
    Cluster,
    Device,
    DeviceTemplateConfig,
    ElasticQuota,
    Job,
    Node,
    NodeMetric,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    TopologyLayer,
    latest_node_metric_ids,
)


def topology_detail_status(cluster: Cluster) -> list[dict[str, Any]]:
    """`status.detailStatus` of the cluster's ClusterNetworkTopology, computed from node labels."""
    layers = [
        Layer(layer.name, layer.parent_name, tuple(layer.label_keys))
        for layer in TopologyLayer.objects.filter(cluster=cluster).order_by("position")
    ]
    nodes = Node.objects.filter(cluster=cluster).order_by("name").values_list("name", "labels")
    return detail_status(build_tree(layers, nodes))


def _quotas_parents_first(cluster: Cluster) -> list[ElasticQuota]:
    quotas = list(
        ElasticQuota.objects.filter(cluster=cluster).select_related("parent").order_by("name")
    )
    children: dict[int | None, list[ElasticQuota]] = defaultdict(list)
    for quota in quotas:
        children[quota.parent_id].append(quota)
    ordered: list[ElasticQuota] = []
    level = children[None]
    while level:
        ordered.extend(level)
        level = sorted((c for q in level for c in children[q.pk]), key=lambda q: q.name)
    return ordered


def export_manifests(cluster: Cluster) -> list[dict[str, Any]]:
    """Every object of `cluster` as Kubernetes/Koordinator documents, in a stable order."""
    docs: list[dict[str, Any]] = []
    docs += [
        serialize.priority_class_doc(pc)
        for pc in PriorityClass.objects.filter(cluster=cluster).order_by("name")
    ]
    layers = list(TopologyLayer.objects.filter(cluster=cluster).order_by("position"))
    if layers:
        docs.append(serialize.topology_doc(layers, topology_detail_status(cluster)))
    docs += [
        serialize.config_map_doc(config)
        for config in DeviceTemplateConfig.objects.filter(cluster=cluster).order_by(
            "namespace", "name"
        )
    ]
    if cluster.scheduler_args:
        docs.append(scheduler_config_doc(cluster.scheduler_args, cluster.scheduler_name))
    nodes = list(Node.objects.filter(cluster=cluster).order_by("name"))
    node_names = {node.pk: node.name for node in nodes}
    docs += [serialize.node_doc(node) for node in nodes]
    devices: dict[int, list[Device]] = defaultdict(list)
    for device in Device.objects.filter(node__cluster=cluster).order_by(
        "node_id", "device_type", "minor"
    ):
        devices[device.node_id].append(device)
    docs += [serialize.device_doc(node, devices[node.pk]) for node in nodes if node.pk in devices]
    latest = {
        metric.node_id: metric
        for metric in NodeMetric.objects.filter(
            id__in=latest_node_metric_ids(NodeMetric.objects.filter(node__cluster=cluster))
        )
    }
    docs += [
        serialize.node_metric_doc(latest[node.pk], node.name) for node in nodes if node.pk in latest
    ]
    docs += [serialize.quota_doc(quota) for quota in _quotas_parents_first(cluster)]
    jobs = {
        job.pk: job
        for job in Job.objects.filter(cluster=cluster)
        .select_related("quota")
        .order_by("namespace", "name")
    }
    docs += [
        serialize.pod_group_doc(job) for job in jobs.values() if job.kind == Job.Kind.POD_GROUP
    ]
    docs += [
        serialize.pod_doc(pod, jobs[pod.job_id], node_names)
        for pod in Pod.objects.filter(cluster=cluster).order_by("namespace", "name")
    ]
    docs += [
        serialize.pdb_doc(pdb)
        for pdb in PodDisruptionBudget.objects.filter(cluster=cluster).order_by("namespace", "name")
    ]
    return docs


_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _NoAliasDumper(_BaseDumper):  # type: ignore[misc,valid-type]
    """libyaml's emitter when present (a large export is many times faster), never aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_manifests(documents: list[dict[str, Any]]) -> str:
    """Documents -> multi-document YAML text, keys in the order written, never aliases."""

    return yaml.dump_all(
        documents,
        Dumper=_NoAliasDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
    )
