"""Bring a cluster's rows in line with what a real cluster reports (the kubernetes backend's sync).

The documents are the mirror's manifest dicts (the same shapes `import_manifests` reads). Nodes,
devices, topology, priority classes, quotas and budgets are upserted; pods we already know have
their node, phase, nomination and annotations refreshed (job rows keep their history); new pods
are imported, joining their job when it exists. A document the parsers reject is skipped and
reported, so one odd object never stops a round. The ConfigMap `koord-scheduler-config` sets the
cluster's `scheduler_args` (from the next round on), with one warning naming the arguments
koordweb does not support.

Pods follow the cluster's story, never ahead of it and never back: a pod the cluster is deleting
stays on its node (terminating, holding what it uses) until the watch says it is gone; a document
older than what koordweb itself did (a binding or an eviction the watch has not shown yet) does
not undo it; a pod re-created under a known name (another UID) starts a new life in the same row.
A pod is gone when the mirror no longer has it, except a pod just created that the watch has not
shown yet (`unseen_uids`). A pod the kubelet refused at admission requeues its whole job.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

from koordweb.backends.base import Deletion, EnactPlan
from koordweb.backends.intents import intents_write
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
    JobState,
    Node,
    NodeMetric,
    Pod,
    PodDisruptionBudget,
    PodPhase,
    PriorityClass,
    TopologyLayer,
)
from koordweb.models.outbox import PodManifest
from koordweb.rows import pods as pod_services
from scheduler.vocabulary import FINISHED_POD_PHASES

logger = logging.getLogger("koordweb.sync")
FINISHED = FINISHED_POD_PHASES  # scheduler.vocabulary: the one list
_said: set[str] = set()  # sync warnings already logged by this process


def cluster_reconcile(
    *,
    cluster: Cluster,
    documents: Iterable[dict[str, Any]],
    now: datetime,
    unseen_uids: Collection[str] = (),
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
    story = _PodStory(cluster, nodes, raw_by_key, set(unseen_uids), now)
    pods = story.follow(by_kind.get(POD, []), by_kind.get(POD_GROUP, []))
    if skipped:
        logger.warning("sync skipped %d documents: %s", len(skipped), "; ".join(skipped[:5]))
    for warning in warnings:
        logger.warning("sync: %s", warning)
    # Gang settings Koordinator would not use (its defaults apply): said once per process, not at
    # every sync of the same pod.
    for obj in parsed:
        for text in obj.extra.get("warnings", ()):
            if text not in _said and len(_said) < 10_000:
                _said.add(text)
                logger.warning("sync: %s %s: %s", obj.kind, obj.key, text)
    return {
        "nodes": len(nodes),
        "pods": pods,
        "skipped": skipped,
        "warnings": warnings,
        "kubelet_rejections": story.rejections,
    }


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


class _PodStory:
    """Pod rows brought in line with the cluster's pods (see the module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        nodes: dict[str, Node],
        raw: dict[tuple[str, str, str], dict[str, Any]],
        unseen_uids: set[str],
        now: datetime,
    ) -> None:
        self.cluster, self.nodes, self.raw, self.now = cluster, nodes, raw, now
        self.unseen_uids = unseen_uids
        self.touched_jobs: set[int] = set()
        self.refused: dict[int, str] = {}  # job id -> the kubelet's words
        self.rejections = 0

    def follow(self, objs: list[ParsedObject], groups: list[ParsedObject]) -> int:
        stored = {(p.namespace, p.name): p for p in self.cluster.pods.select_related("job")}
        new: list[ParsedObject] = []
        for obj in objs:
            pod = stored.get((obj.namespace, obj.name))
            if pod is None:
                new.append(obj)
            else:
                self._update(pod, obj)
        present = {(o.namespace, o.name) for o in objs}
        for identity, pod in stored.items():
            # A pod without a uid was submitted to koordweb and is not in the cluster yet.
            if identity in present or pod.phase in FINISHED or not pod.uid:
                continue
            if pod.uid in self.unseen_uids:
                continue  # created by us a moment ago: the watch has not shown it yet
            self._gone(pod)
        if new:
            self.touched_jobs |= _import_new_pods(self.cluster, new, groups, self.raw)
            _manifests_capture(
                self.cluster, [self.raw.get((POD, o.namespace, o.name)) for o in new]
            )
        self._requeue_refused()
        jobs = Job.objects.filter(id__in=self.touched_jobs)
        pod_services.job_refresh_states(jobs=jobs, now=self.now)
        return len(objs)

    def _update(self, pod: Pod, obj: ParsedObject) -> None:
        uid = obj.values["uid"] or pod.uid
        node = self.nodes.get(obj.refs.get("node") or "")
        changes: dict[str, Any] = {
            "node": node,
            "nominated_node": self.nodes.get(obj.refs.get("nominated_node") or ""),
            "phase": obj.values["phase"],
            "annotations": obj.values["annotations"],
            "terminating": obj.values["terminating"],
            "uid": uid,
        }
        if pod.uid and uid != pod.uid:
            # Deleted and created again under the same name: a new pod in the old row.
            changes.update(bound_at=None, started_at=None, finished_at=None)
            changes["terminating_since"] = self.now if changes["terminating"] else None
        elif pod.phase in FINISHED:
            return  # the same pod's last words were already heard
        else:
            if pod.node_id and node is None:
                # Bound pods never lose their node: this document predates our binding.
                changes.update(node=pod.node, annotations=pod.annotations, phase=pod.phase)
            if pod.terminating and not changes["terminating"]:
                changes["terminating"] = True  # predates the eviction we made
            if changes["terminating"] and not pod.terminating:
                changes["terminating_since"] = self.now
            if _phase_rank(changes["phase"]) < _phase_rank(pod.phase):
                changes["phase"] = pod.phase
            if changes["nominated_node"] is None and node is None:
                changes["nominated_node"] = pod.nominated_node  # predates our nomination
            nominated = changes["nominated_node"]
            if nominated is not None and pod.nominated_node_id != nominated.id:
                # A nomination new to us: from its PodScheduled=False time, else from now.
                changes["nominated_at"] = obj.values["nominated_at"] or self.now
            elif nominated is None:
                changes["nominated_at"] = None
            refusal = _kubelet_refusal(self.raw.get((POD, obj.namespace, obj.name)) or {})
            if refusal and changes["phase"] == PodPhase.FAILED and node is not None:
                # Refused, not finished: it stays in the row, holding its node, until the
                # requeue has deleted it and the watch says it is gone.
                self.rejections += 1
                self.refused.setdefault(
                    pod.job_id, f"the kubelet on {node.name} refused pod {pod.name}: {refusal}"
                )
                changes["phase"] = pod.phase
            elif changes["phase"] in FINISHED:
                changes["finished_at"] = self.now
        dirty = [k for k, v in changes.items() if getattr(pod, k) != v]
        if dirty:
            for key in dirty:
                setattr(pod, key, changes[key])
            pod.save(update_fields=dirty)
            self.touched_jobs.add(pod.job_id)

    def _gone(self, pod: Pod) -> None:
        """The cluster no longer has the pod: it stopped. A pod we did not see finish failed."""
        pod.phase = PodPhase.FAILED
        pod.finished_at = self.now
        pod.terminating = False
        pod.nominated_node = None
        pod.save(update_fields=["phase", "finished_at", "terminating", "nominated_node"])
        self.touched_jobs.add(pod.job_id)

    def _requeue_refused(self) -> None:
        """Take every refused job off its nodes whole; it is queued again once its pods are gone."""
        if not self.refused:
            return
        deletions: list[Deletion] = []
        for job in Job.objects.filter(id__in=list(self.refused)):
            if job.state in JobState.FINAL:
                continue
            doomed = pod_services.job_requeue_refused(
                job=job, reason=self.refused[job.id], now=self.now
            )
            # What creating them again starts from (pods first seen before manifests were kept).
            _manifests_capture(
                self.cluster, [self.raw.get((POD, p.namespace, p.name)) for p in doomed]
            )
            for pod in doomed:
                deletions.append(Deletion(pod.id, pod.namespace, pod.name, pod.uid))
        if deletions:
            plan = EnactPlan(deletions=tuple(deletions))
            intents_write(cluster=self.cluster, round_id=None, plan=plan, now=self.now)


def _manifests_capture(cluster: Cluster, docs: Iterable[dict[str, Any] | None]) -> None:
    """Keep each pod's manifest as the cluster holds it (not already kept): a pod koordweb has
    to create again (its gang refused by a kubelet) is created from it, and one another
    controller owns (`ownerReferences` with `controller: true`) is never created by koordweb."""
    wanted = {
        ((d.get("metadata") or {}).get("namespace") or "default", d["metadata"].get("name")): d
        for d in docs
        if d and (d.get("metadata") or {}).get("name")
    }
    if not wanted:
        return
    rows = {
        (ns, name): pod_id
        for pod_id, ns, name in cluster.pods.filter(
            namespace__in={ns for ns, _ in wanted}, name__in={name for _, name in wanted}
        ).values_list("id", "namespace", "name")
        if (ns, name) in wanted
    }
    kept = set(
        PodManifest.objects.filter(pod_id__in=rows.values()).values_list("pod_id", flat=True)
    )
    PodManifest.objects.bulk_create(
        PodManifest(
            pod_id=pod_id, document=_as_created(wanted[key]), controller=_controller(wanted[key])
        )
        for key, pod_id in rows.items()
        if pod_id not in kept
    )


def _as_created(doc: dict[str, Any]) -> dict[str, Any]:
    """The pod as it was created: no status, no node (a binding set it), no server fields."""
    metadata = {
        k: v
        for k, v in (doc.get("metadata") or {}).items()
        if k in ("name", "namespace", "labels", "annotations", "ownerReferences", "generateName")
    }
    spec = {k: v for k, v in (doc.get("spec") or {}).items() if k != "nodeName"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _controller(doc: dict[str, Any]) -> str:
    for owner in (doc.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller"):
            return f"{owner.get('kind')}/{owner.get('name')}"[:400]
    return ""


# Why a kubelet fails a pod at admission (pkg/kubelet/lifecycle/predicate.go and admission
# handlers): the pod never ran, so its job may simply be placed again.
ADMISSION_REASONS = frozenset(
    {
        "UnexpectedAdmissionError",
        "NodeAffinity",
        "NodeName",
        "InvalidNodeInfo",
        "UnexpectedPredicateFailureType",
        "PodOSSelectorNodeLabelDoesNotMatch",
        "PodOSNotSupported",
        "TopologyAffinityError",
    }
)


def _kubelet_refusal(doc: dict[str, Any]) -> str:
    """The kubelet's reason and message when it refused the pod at admission, else ''."""
    status = doc.get("status") or {}
    reason = str(status.get("reason") or "")
    if not (reason.startswith("OutOf") or reason in ADMISSION_REASONS):
        return ""
    message = str(status.get("message") or "").strip()
    return f"{reason} ({message})" if message else reason


_PHASE_ORDER = {PodPhase.PENDING: 0, PodPhase.RUNNING: 1, PodPhase.SUCCEEDED: 2, PodPhase.FAILED: 2}


def _phase_rank(phase: str) -> int:
    return _PHASE_ORDER.get(phase, 0)  # type: ignore[call-overload]


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
