"""Write a validated `ManifestSet` into a cluster: resolve every reference, refuse duplicates.

References may name objects of the same import or rows already stored in the cluster (a pod
submitted through the API runs on stored nodes, under a stored quota). Everything runs inside one
`transaction.atomic()` block, a savepoint when the caller already holds a transaction, so a
ManifestError leaves the database as it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, models, transaction
from django.utils import timezone

from koordweb.manifests.errors import ManifestError
from koordweb.manifests.objects import (
    CONFIG_MAP,
    DEVICE,
    NODE,
    NODE_METRIC,
    PDB,
    PRIORITY_CLASS,
    QUOTA,
    TOPOLOGY,
    JobPlan,
    ManifestSet,
    ParsedObject,
)
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
)
from koordweb.models.workload import PreemptionPolicy
from scheduler.vocabulary import (
    DEFAULT_QUOTA,
    GANG_TOPOLOGY_SPEC,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    QUOTA_IS_PARENT,
    QUOTA_NAME,
    QUOTA_PARENT,
    SYSTEM_PRIORITY_CLASSES,
)

BUILT_IN = "Kubernetes' built-in priority class"


def apply_manifests(cluster: Cluster, manifests: ManifestSet) -> dict[str, int]:
    """Create the rows of `manifests` in `cluster`; returns the count of objects per kind."""
    try:
        with transaction.atomic():
            _Applier(cluster, manifests).run()
    except IntegrityError as exc:
        # The checks above should leave nothing for the database to refuse; if a concurrent
        # writer won a race, still answer with the one kind of error callers handle.
        raise ManifestError(None, "database", f"conflicts with stored rows: {exc}") from exc
    return manifests.counts()


def pods_join(cluster: Cluster, joining: list[tuple[ParsedObject, Job]]) -> None:
    """Add parsed pods to jobs already stored (a cluster sync seeing a gang's late members)."""
    applier = _Applier(cluster, ManifestSet())
    applier.classes = _stored_classes(cluster)
    applier._load_nodes(
        [pod.refs.get(ref, "") for pod, _ in joining for ref in ("node", "nominated_node")]
    )
    Pod.objects.bulk_create(applier._pod(pod, job) for pod, job in joining)


def _stored_classes(cluster: Cluster) -> dict[str, PriorityClass]:
    return {pc.name: pc for pc in PriorityClass.objects.filter(cluster=cluster)}


def _now() -> Any:
    return timezone.now().replace(microsecond=0)


class _Applier:
    def __init__(self, cluster: Cluster, manifests: ManifestSet) -> None:
        self.cluster = cluster
        self.manifests = manifests
        self.classes: dict[str, PriorityClass] = {}
        self.nodes: dict[str, Node] = {}
        self.quotas: dict[str, ElasticQuota] = {}
        self.layers: set[str] = set()

    def run(self) -> None:
        self.priority_classes()
        self.topology()
        self.config_maps()
        self.create_nodes()
        self.devices()
        self.node_metrics()
        self.create_quotas()
        self.jobs_and_pods()
        self.pdbs()

    # -- helpers -------------------------------------------------------------------------------
    def _refuse_stored(
        self,
        kind: str,
        model: type[models.Model],
        objs: list[ParsedObject],
        namespaced: bool = False,
    ) -> None:
        """A name already stored in the cluster is a duplicate, as within the import."""
        if not objs:
            return
        fields = ("namespace", "name") if namespaced else ("name",)
        names = [obj.name for obj in objs]
        stored = set(
            model._default_manager.filter(cluster=self.cluster, name__in=names).values_list(*fields)
        )
        for obj in objs:
            identity = (obj.namespace, obj.name) if namespaced else (obj.name,)
            if identity in stored:
                raise ManifestError(
                    obj.index,
                    "metadata.name",
                    f"{kind} {obj.key!r} already exists in cluster {self.cluster.name!r}",
                )

    def _load_nodes(self, names: Iterable[str]) -> None:
        missing = {name for name in names if name and name not in self.nodes}
        if missing:
            for node in Node.objects.filter(cluster=self.cluster, name__in=missing):
                self.nodes[node.name] = node

    def _node(self, obj: ParsedObject, ref: str, field: str) -> Node | None:
        name = obj.refs[ref]
        if not name:
            return None
        node = self.nodes.get(name)
        if node is None:
            raise ManifestError(obj.index, field, f"unknown node {name!r}")
        return node

    # -- the physical cluster -------------------------------------------------------------------
    def priority_classes(self) -> None:
        objs = self.manifests.of_kind(PRIORITY_CLASS)
        self._refuse_stored(PRIORITY_CLASS, PriorityClass, objs)
        self.classes = _stored_classes(self.cluster)
        new = [PriorityClass(cluster=self.cluster, name=obj.name, **obj.values) for obj in objs]
        defaults = [pc for pc in self.classes.values() if pc.global_default]
        for obj, pc in zip(objs, new, strict=True):
            if pc.global_default:
                if defaults:
                    raise ManifestError(
                        obj.index,
                        "globalDefault",
                        f"PriorityClass {defaults[0].name!r} is already the global default",
                    )
                defaults.append(pc)
        PriorityClass.objects.bulk_create(new)
        self.classes.update((pc.name, pc) for pc in new)

    def topology(self) -> None:
        stored = set(
            TopologyLayer.objects.filter(cluster=self.cluster).values_list("name", flat=True)
        )
        for obj in self.manifests.of_kind(TOPOLOGY):
            if stored:
                raise ManifestError(
                    obj.index,
                    "metadata.name",
                    "ClusterNetworkTopology 'default' already exists in cluster "
                    f"{self.cluster.name!r}",
                )
            TopologyLayer.objects.bulk_create(
                TopologyLayer(cluster=self.cluster, **row) for row in obj.rows
            )
            stored = {str(row["name"]) for row in obj.rows}
        self.layers = stored

    def config_maps(self) -> None:
        objs = self.manifests.of_kind(CONFIG_MAP)
        for config in [o for o in objs if "scheduler_args" in o.extra]:
            # koord-scheduler-config: the cluster's scheduler profile, not a template ConfigMap.
            self.cluster.scheduler_args = config.extra["scheduler_args"]
            self.cluster.save(update_fields=["scheduler_args"])
        objs = [o for o in objs if "scheduler_args" not in o.extra]
        self._refuse_stored(CONFIG_MAP, DeviceTemplateConfig, objs, namespaced=True)
        DeviceTemplateConfig.objects.bulk_create(
            DeviceTemplateConfig(
                cluster=self.cluster, namespace=o.namespace, name=o.name, **o.values
            )
            for o in objs
        )

    def create_nodes(self) -> None:
        objs = self.manifests.of_kind(NODE)
        self._refuse_stored(NODE, Node, objs)
        new = Node.objects.bulk_create(
            Node(cluster=self.cluster, name=obj.name, **obj.values) for obj in objs
        )
        self.nodes.update((node.name, node) for node in new)
        referenced = [
            name
            for obj in self.manifests.objects
            for name in (obj.refs.get("node"), obj.refs.get("nominated_node"))
            if name
        ]
        self._load_nodes(referenced)

    def devices(self) -> None:
        rows: list[Device] = []
        for obj in self.manifests.of_kind(DEVICE):
            node = self._node(obj, "node", "metadata.name")
            assert node is not None  # a Device CR always names its node
            if node.pk and Device.objects.filter(node=node).exists():
                raise ManifestError(
                    obj.index, "metadata.name", f"node {node.name!r} already has devices"
                )
            node.device_labels = obj.values["device_labels"]
            node.device_annotations = obj.values["device_annotations"]
            node.save(update_fields=["device_labels", "device_annotations"])
            vendor = node.labels.get(LABEL_GPU_VENDOR, "")[:32]
            model = node.labels.get(LABEL_GPU_MODEL, "")[:64]
            for row in obj.rows:
                is_gpu = row["device_type"] == Device.Type.GPU
                rows.append(
                    Device(
                        node=node,
                        vendor=vendor if is_gpu else "",
                        model=model if is_gpu else "",
                        **row,
                    )
                )
        Device.objects.bulk_create(rows)

    def node_metrics(self) -> None:
        metrics = []
        for obj in self.manifests.of_kind(NODE_METRIC):
            node = self._node(obj, "node", "metadata.name")
            values = {**obj.values, "reported_at": obj.values["reported_at"] or _now()}
            metrics.append(NodeMetric(node=node, **values))
        NodeMetric.objects.bulk_create(metrics)

    # -- workloads ------------------------------------------------------------------------------
    def create_quotas(self) -> None:
        objs = self.manifests.of_kind(QUOTA)
        self._refuse_stored(QUOTA, ElasticQuota, objs)
        # Every stored quota: a pod without a quota label may belong to one by its namespace.
        self.quotas = {q.name: q for q in ElasticQuota.objects.filter(cluster=self.cluster)}
        by_name = {obj.name: obj for obj in objs}
        pending = list(objs)
        while pending:  # parents before children; no progress means a missing parent or a cycle
            ready = [
                obj
                for obj in pending
                if not obj.refs["parent"] or obj.refs["parent"] in self.quotas
            ]
            if not ready:
                stuck = pending[0]
                missing = stuck.refs["parent"]
                problem = "form a cycle" if missing in by_name else "is not defined"
                raise ManifestError(
                    stuck.index,
                    f"metadata.labels.{QUOTA_PARENT}",
                    f"parent quota {missing!r} {problem}",
                )
            for obj in ready:
                parent = self.quotas.get(obj.refs["parent"]) if obj.refs["parent"] else None
                if parent is not None and not parent.is_parent:
                    raise ManifestError(
                        obj.index,
                        f"metadata.labels.{QUOTA_PARENT}",
                        f"quota {parent.name!r} is not a parent "
                        f"(label {QUOTA_IS_PARENT} is not true)",
                    )
                self.quotas[obj.name] = ElasticQuota.objects.create(
                    cluster=self.cluster,
                    namespace=obj.namespace,
                    name=obj.name,
                    parent=parent,
                    **obj.values,
                )
            pending = [obj for obj in pending if obj.name not in self.quotas]

    def jobs_and_pods(self) -> None:
        plans = self.manifests.jobs
        new_plans = [plan for plan in plans if not plan.existing]
        stored_jobs = {
            (job.namespace, job.name): job
            for job in Job.objects.filter(
                cluster=self.cluster, name__in=[plan.name for plan in plans]
            ).select_related("quota")
        }
        pods = [pod for plan in plans for pod in plan.pods]
        self._refuse_stored("Pod", Pod, pods, namespaced=True)
        jobs: list[Job] = []
        for plan in new_plans:
            if (plan.namespace, plan.name) in stored_jobs:
                raise ManifestError(
                    plan.index,
                    "metadata.name",
                    f"job {plan.gang_id} already exists in cluster {self.cluster.name!r}",
                )
            jobs.append(self._job(plan))
        Job.objects.bulk_create(jobs)
        owners = dict(zip([id(p) for p in new_plans], jobs, strict=True))
        for plan in plans:
            if plan.existing:
                owners[id(plan)] = self._stored_pod_group(plan, stored_jobs)
        Pod.objects.bulk_create(
            self._pod(pod, owners[id(plan)]) for plan in plans for pod in plan.pods
        )

    def _stored_pod_group(self, plan: JobPlan, stored: dict[tuple[str, str], Job]) -> Job:
        job = stored.get((plan.namespace, plan.name))
        first = plan.pods[0]
        if job is None or job.kind != Job.Kind.POD_GROUP:
            raise ManifestError(first.index, "metadata.labels", f"unknown PodGroup {plan.gang_id}")
        if plan.quota_name and (job.quota is None or job.quota.name != plan.quota_name):
            raise ManifestError(
                first.index,
                f"metadata.labels.{QUOTA_NAME}",
                f"PodGroup {plan.gang_id} is not in quota {plan.quota_name!r}",
            )
        members = job.pods.count() + len(plan.pods)
        if members > job.total_number:
            job.total_number = members
            job.save(update_fields=["total_number"])
        return job

    def _job(self, plan: JobPlan) -> Job:
        values = dict(plan.values)
        for rule in values.get("topology_spec", {}).get("gatherStrategy", []):
            if rule["layer"] not in self.layers:
                raise ManifestError(
                    plan.index,
                    f"metadata.annotations.{GANG_TOPOLOGY_SPEC}",
                    f"unknown topology layer {rule['layer']!r} "
                    f"(ClusterNetworkTopology has {sorted(self.layers) or 'no layers'})",
                )
        quota = self._quota_of(plan)
        priorities = [self._priority(pod) for pod in plan.pods]
        classes = [pc for _, pc, _ in priorities if pc is not None]
        policies = {policy for _, _, policy in priorities}
        values.pop("pod_group_api", None)
        values.update(
            priority=max((value for value, _, _ in priorities), default=0),
            priority_class=classes[0] if classes else None,
            preemption_policy=PreemptionPolicy.NEVER
            if PreemptionPolicy.NEVER in policies
            else PreemptionPolicy.PREEMPT_LOWER,
            submitted_at=values.get("submitted_at") or _now(),
        )
        return Job(
            cluster=self.cluster,
            namespace=plan.namespace,
            name=plan.name,
            kind=plan.kind,
            pod_group_api=plan.values.get("pod_group_api", ""),
            quota=quota,
            **values,
        )

    def _quota_of(self, plan: JobPlan) -> ElasticQuota | None:
        """The job's quota as Koordinator's ElasticQuota plugin finds a pod's (`GetQuotaName`,
        `getPodAssociateQuotaName`): the one its quota label names; without a label, the quota
        named after its namespace in that namespace, else one whose namespaces annotation lists
        it; a label naming no quota, or nothing found, the default quota when the cluster has
        one (`koordinator-default-quota`), else none. A label naming no quota is warned about."""
        if plan.quota_name in self.quotas:
            return self.quotas[plan.quota_name]
        leaves = sorted((q for q in self.quotas.values() if not q.is_parent), key=lambda q: q.name)
        if plan.quota_name:
            plan.pods[0].extra.setdefault("warnings", []).append(
                f"document {plan.pods[0].index}: metadata.labels.{QUOTA_NAME}: no ElasticQuota "
                f"{plan.quota_name!r}: Koordinator counts the job in its default quota instead"
            )
        else:
            for quota in leaves:
                if quota.name == plan.namespace and quota.namespace == plan.namespace:
                    return quota
            for quota in leaves:
                if plan.namespace in quota.listed_namespaces:
                    return quota
        return self.quotas.get(DEFAULT_QUOTA)

    def _priority(self, pod: ParsedObject) -> tuple[int, PriorityClass | None, str]:
        """A pod's priority: spec.priority, else its class's value, else the global default.

        A class the cluster has no object of is one of Kubernetes' built-in system classes
        (its row made on first use), or, when the pod carries spec.priority as the API server's
        admission left it, a class deleted since: the pod keeps that priority, with a warning.
        Naming neither is refused."""
        name = pod.values["priority_class_name"]
        explicit = pod.extra["priority"]
        priority_class = None
        if name:
            priority_class = self.classes.get(name) or self._system_class(name)
            if priority_class is None and explicit is None:
                raise ManifestError(
                    pod.index, "spec.priorityClassName", f"unknown PriorityClass {name!r}"
                )
            if priority_class is None:
                warning = (
                    f"document {pod.index}: spec.priorityClassName: no PriorityClass {name!r}: "
                    f"the pod keeps its spec.priority {explicit}, as Kubernetes does"
                )
                warnings = pod.extra.setdefault("warnings", [])
                if warning not in warnings:
                    warnings.append(warning)
        elif explicit is None:
            priority_class = next((pc for pc in self.classes.values() if pc.global_default), None)
        value = (
            explicit if explicit is not None else (priority_class.value if priority_class else 0)
        )
        policy = pod.extra["preemption_policy"] or (
            priority_class.preemption_policy if priority_class else PreemptionPolicy.PREEMPT_LOWER
        )
        return value, priority_class, policy

    def _system_class(self, name: str) -> PriorityClass | None:
        """Kubernetes' built-in `system-cluster-critical` and `system-node-critical` exist in
        every cluster, listed or not: the row is made when a pod first names one."""
        if name not in SYSTEM_PRIORITY_CLASSES:
            return None
        made, _ = PriorityClass.objects.get_or_create(
            cluster=self.cluster,
            name=name,
            defaults={"value": SYSTEM_PRIORITY_CLASSES[name], "description": BUILT_IN},
        )
        self.classes[name] = made
        return made

    def _pod(self, pod: ParsedObject, job: Job) -> Pod:
        value, priority_class, policy = self._priority(pod)
        values = {**pod.values, "created_at": pod.values["created_at"] or _now()}
        if priority_class is not None:
            values["priority_class_name"] = priority_class.name
        elif pod.extra["priority"] is None:
            values["priority_class_name"] = ""  # the global default, when there is none
        return Pod(
            cluster=self.cluster,
            job=job,
            namespace=pod.namespace,
            name=pod.name,
            scheduler_name=pod.extra["scheduler_name"] or self.cluster.scheduler_name,
            priority=value,
            preemption_policy=policy,
            node=self._node(pod, "node", "spec.nodeName"),
            nominated_node=self._node(pod, "nominated_node", "status.nominatedNodeName"),
            **values,
        )

    def pdbs(self) -> None:
        objs = self.manifests.of_kind(PDB)
        self._refuse_stored(PDB, PodDisruptionBudget, objs, namespaced=True)
        PodDisruptionBudget.objects.bulk_create(
            PodDisruptionBudget(
                cluster=self.cluster, namespace=o.namespace, name=o.name, **o.values
            )
            for o in objs
        )
