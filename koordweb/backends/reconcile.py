"""Bring a cluster's rows in line with what a real cluster reports (the kubernetes backend's sync).

The documents are the mirror's manifest dicts (the same shapes `import_manifests` reads). Nodes,
devices, topology, priority classes, quotas and budgets are upserted; pods we already know have
their node, phase, nomination and annotations refreshed (job rows keep their history); new pods
are imported, joining their job when it exists; pods gone from the cluster are finished. The
ConfigMap `koord-scheduler-config` sets the cluster's `scheduler_args` (from the next round on),
with one warning naming the arguments koordweb does not support.
A document the parsers reject is skipped and reported, so one odd object never stops a round.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from koordweb.manifests import ManifestError, apply_manifests, parse_documents
from koordweb.manifests.apply import pods_join
from koordweb.manifests.objects import (
    CONFIG_MAP,
    DEVICE,
    NODE,
    NODE_METRIC,
    PDB,
    POD,
    POD_GROUP,
    PRIORITY_CLASS,
    QUOTA,
    TOPOLOGY,
    ManifestSet,
    ParsedObject,
)
from koordweb.manifests.parse import parse_document
from koordweb.models import (
    Cluster,
    Device,
    ElasticQuota,
    Job,
    Node,
    NodeMetric,
    PodDisruptionBudget,
    PodPhase,
    PriorityClass,
    TopologyLayer,
)
from koordweb.services import pods as pod_services

logger = logging.getLogger("koordweb.sync")
FINISHED = (PodPhase.SUCCEEDED, PodPhase.FAILED)


def cluster_reconcile(
    *, cluster: Cluster, documents: Iterable[dict[str, Any]], now: datetime
) -> dict[str, Any]:
    """Upsert the cluster's rows from its documents; returns counts and skipped documents."""
    parsed: list[ParsedObject] = []
    raw_by_key: dict[tuple[str, str, str], dict[str, Any]] = {}
    skipped: list[str] = []
    for index, doc in enumerate(documents, start=1):
        try:
            obj = parse_document(index, doc)
        except ManifestError as exc:
            skipped.append(str(exc))
            continue
        parsed.append(obj)
        raw_by_key[(obj.kind, obj.namespace, obj.name)] = doc
    by_kind: dict[str, list[ParsedObject]] = {}
    for obj in parsed:
        by_kind.setdefault(obj.kind, []).append(obj)
    warnings = _scheduler_config(cluster, by_kind.get(CONFIG_MAP, []))
    _priority_classes(cluster, by_kind.get(PRIORITY_CLASS, []))
    _topology(cluster, by_kind.get(TOPOLOGY, []))
    nodes = _nodes(cluster, by_kind.get(NODE, []))
    _devices(cluster, nodes, by_kind.get(DEVICE, []))
    _metrics(nodes, by_kind.get(NODE_METRIC, []))
    _quotas(cluster, by_kind.get(QUOTA, []))
    _pdbs(cluster, by_kind.get(PDB, []))
    pods = _pods(cluster, nodes, by_kind.get(POD, []), by_kind.get(POD_GROUP, []), raw_by_key, now)
    if skipped:
        logger.warning("sync skipped %d documents: %s", len(skipped), "; ".join(skipped[:5]))
    for warning in warnings:
        logger.warning("sync: %s", warning)
    return {"nodes": len(nodes), "pods": pods, "skipped": skipped, "warnings": warnings}


def _scheduler_config(cluster: Cluster, objs: list[ParsedObject]) -> list[str]:
    """The cluster's scheduler_args from koord-scheduler-config; the warnings it brings."""
    config = next((o for o in objs if "scheduler_args" in o.extra), None)
    if config is None:
        return []
    if cluster.scheduler_args != config.extra["scheduler_args"]:
        cluster.scheduler_args = config.extra["scheduler_args"]
        cluster.save(update_fields=["scheduler_args"])
    return [config.extra["warning"]] if config.extra["warning"] else []


def _priority_classes(cluster: Cluster, objs: list[ParsedObject]) -> None:
    for obj in objs:
        PriorityClass.objects.update_or_create(cluster=cluster, name=obj.name, defaults=obj.values)


def _topology(cluster: Cluster, objs: list[ParsedObject]) -> None:
    default = next((o for o in objs if o.name == "default"), None)
    if default is None:
        return
    wanted = [(r["name"], r["parent_name"], r["label_keys"]) for r in default.rows]
    stored = [
        (layer.name, layer.parent_name, layer.label_keys)
        for layer in cluster.topology_layers.order_by("position")
    ]
    if wanted == stored:
        return
    cluster.topology_layers.all().delete()
    TopologyLayer.objects.bulk_create(
        TopologyLayer(cluster=cluster, **{"position": i, **row})
        for i, row in enumerate(default.rows)
    )


def _nodes(cluster: Cluster, objs: list[ParsedObject]) -> dict[str, Node]:
    stored = {n.name: n for n in cluster.nodes.all()}
    seen: dict[str, Node] = {}
    for obj in objs:
        node = stored.get(obj.name)
        if node is None:
            node = Node.objects.create(cluster=cluster, name=obj.name, **obj.values)
        elif any(getattr(node, k) != v for k, v in obj.values.items()):
            for key, value in obj.values.items():
                setattr(node, key, value)
            node.save(update_fields=list(obj.values))
        seen[obj.name] = node
    gone = [name for name in stored if name not in seen]
    if gone:
        cluster.nodes.filter(name__in=gone).delete()
    return seen


def _devices(cluster: Cluster, nodes: dict[str, Node], objs: list[ParsedObject]) -> None:
    for obj in objs:
        node = nodes.get(obj.name)
        if node is None:
            continue
        if any(getattr(node, k) != v for k, v in obj.values.items()):
            for key, value in obj.values.items():
                setattr(node, key, value)
            node.save(update_fields=list(obj.values))
        fields = sorted({k for row in obj.rows for k in row})
        wanted = sorted(repr([row.get(k) for k in fields]) for row in obj.rows)
        stored = sorted(repr([getattr(d, k) for k in fields]) for d in node.devices.all())
        if wanted == stored:
            continue
        node.devices.all().delete()
        Device.objects.bulk_create(Device(node=node, **row) for row in obj.rows)


def _metrics(nodes: dict[str, Node], objs: list[ParsedObject]) -> None:
    for obj in objs:
        node = nodes.get(obj.name)
        reported = obj.values.get("reported_at")
        if node is None or reported is None:
            continue
        if not node.metrics.filter(reported_at__gte=reported).exists():
            NodeMetric.objects.create(node=node, **obj.values)


def _quotas(cluster: Cluster, objs: list[ParsedObject]) -> None:
    rows: dict[str, ElasticQuota] = {}
    for obj in objs:
        quota, _ = ElasticQuota.objects.update_or_create(
            cluster=cluster, name=obj.name, defaults={"namespace": obj.namespace, **obj.values}
        )
        rows[obj.name] = quota
    for obj in objs:
        parent_name = obj.refs.get("parent") or ""
        parent = rows.get(parent_name) or (
            cluster.quotas.filter(name=parent_name).first() if parent_name else None
        )
        quota = rows[obj.name]
        if quota.parent_id != (parent.id if parent else None):
            quota.parent = parent
            quota.save(update_fields=["parent"])


def _pdbs(cluster: Cluster, objs: list[ParsedObject]) -> None:
    keep = set()
    for obj in objs:
        PodDisruptionBudget.objects.update_or_create(
            cluster=cluster, namespace=obj.namespace, name=obj.name, defaults=obj.values
        )
        keep.add((obj.namespace, obj.name))
    for pdb in cluster.pdbs.all():
        if (pdb.namespace, pdb.name) not in keep:
            pdb.delete()


def _pods(
    cluster: Cluster,
    nodes: dict[str, Node],
    objs: list[ParsedObject],
    groups: list[ParsedObject],
    raw: dict[tuple[str, str, str], dict[str, Any]],
    now: datetime,
) -> int:
    stored = {(p.namespace, p.name): p for p in cluster.pods.select_related("job")}
    touched_jobs: set[int] = set()
    new: list[ParsedObject] = []
    for obj in objs:
        pod = stored.get((obj.namespace, obj.name))
        if pod is None:
            new.append(obj)
            continue
        node = nodes.get(obj.refs.get("node") or "")
        nominated = nodes.get(obj.refs.get("nominated_node") or "")
        changes = {
            "node": node,
            "nominated_node": nominated,
            "phase": obj.values["phase"],
            "annotations": obj.values["annotations"],
            "terminating": obj.values["terminating"],
            "uid": obj.values["uid"] or pod.uid,
        }
        if pod.node_id and node is None and pod.phase not in FINISHED:
            changes["phase"] = PodPhase.FAILED  # unbound by someone else: it is gone
        if nominated is not None and pod.nominated_node_id != nominated.id:
            # A nomination new to us: from its PodScheduled=False time, else from now.
            changes["nominated_at"] = obj.values["nominated_at"] or now
        elif nominated is None:
            changes["nominated_at"] = None
        dirty = [k for k, v in changes.items() if getattr(pod, k) != v]
        if dirty:
            for key in dirty:
                setattr(pod, key, changes[key])
            pod.save(update_fields=dirty)
            touched_jobs.add(pod.job_id)
    present = {(o.namespace, o.name) for o in objs}
    for identity, pod in stored.items():
        # A pod without a uid was submitted to koordweb and is not in the cluster yet.
        if identity not in present and pod.phase not in FINISHED and pod.uid:
            pod.phase = PodPhase.FAILED if pod.node_id is None else PodPhase.SUCCEEDED
            pod.finished_at = now
            pod.save(update_fields=["phase", "finished_at"])
            touched_jobs.add(pod.job_id)
    if new:
        touched_jobs |= _import_new_pods(cluster, new, groups, raw)
    pod_services.job_refresh_states(jobs=Job.objects.filter(id__in=touched_jobs), now=now)
    return len(objs)


def _import_new_pods(
    cluster: Cluster,
    pods: list[ParsedObject],
    groups: list[ParsedObject],
    raw: dict[tuple[str, str, str], dict[str, Any]],
) -> set[int]:
    """Pods of jobs we know join them; the rest are imported with their PodGroups as new jobs."""
    manifests = parse_documents(
        [raw[(POD_GROUP, g.namespace, g.name)] for g in groups]
        + [raw[(POD, p.namespace, p.name)] for p in pods]
    )
    jobs = {(j.namespace, j.name): j for j in cluster.jobs.all()}
    fresh = ManifestSet()
    joining: list[tuple[ParsedObject, Job]] = []
    for plan in manifests.jobs:
        job = jobs.get((plan.namespace, plan.name))
        if job is not None:
            joining.extend((pod, job) for pod in plan.pods)
        elif plan.pods:
            fresh.jobs.append(plan)
            fresh.objects.extend(plan.pods)
    wanted_groups = {(p.namespace, p.name) for p in fresh.jobs if p.kind == "podgroup"}
    fresh.objects.extend(
        g for g in manifests.of_kind(POD_GROUP) if (g.namespace, g.name) in wanted_groups
    )
    for plan in fresh.jobs:
        if plan.kind == "podgroup" and (plan.namespace, plan.name) in wanted_groups:
            plan.existing = False
    if fresh.jobs:
        apply_manifests(cluster, fresh)
    if joining:
        pods_join(cluster, joining)
    names = {(p.namespace, p.name) for p in pods}
    return set(
        cluster.pods.filter(
            namespace__in={n for n, _ in names}, name__in={m for _, m in names}
        ).values_list("job_id", flat=True)
    )
