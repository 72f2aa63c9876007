"""The physical cluster: nodes, their devices, the network topology and node usage reports (and
`latest_node_metric_ids`: the one rule for which report of a node is its latest)."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, router, transaction

from koordweb.models.deletion import owned_rows_delete
from koordweb.models.fields import validate_resource_list, validate_string_map
from scheduler.api import check_args, problem_lines


class ClusterQuerySet(models.QuerySet["Cluster"]):
    def delete(self) -> tuple[int, dict[str, int]]:
        """Delete the clusters with their rows locked first. Django deletes what refers to a
        cluster before the cluster itself, seconds later for a large one: a worker that created
        a row of the cluster meanwhile (its lease at a heartbeat, a round) would commit it, and
        the deletion would fail at its commit on that reference. Locked, the worker's insert
        waits for the deletion and then finds the cluster gone. The rows go by id lists
        (`models.deletion`), not through Django's collector, which loads every one of them."""
        with transaction.atomic(using=self.db):
            pks = list(self.order_by().select_for_update().values_list("pk", flat=True))
            done = owned_rows_delete(Cluster, pks, using=self.db)
            return super().delete() if done is None else done


class Cluster(models.Model):
    """One scheduling domain: a simulated cluster or a Kubernetes cluster behind a backend."""

    class Backend(models.TextChoices):
        SIMULATED = "simulated", "simulated"
        KUBERNETES = "kubernetes", "kubernetes"

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=200, blank=True)
    backend = models.CharField(max_length=16, choices=Backend.choices, default=Backend.SIMULATED)
    scheduler_name = models.CharField(max_length=63, default="koordweb")
    scheduler_args = models.JSONField(
        default=dict,
        blank=True,
        help_text='Per-plugin arguments of the scheduler profile, e.g. {"NetworkTopology": '
        '{"bestFit": false}, "JobPreemption": {"candidateLimit": 4}}; empty: our default, which '
        'packs (docs/koordinator-compat.md); {"PrioritySort": {"sizeWindow": "0s"}, '
        '"NetworkTopology": {"bestFit": false, "packParents": false}}: Koordinator\'s order.',
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # A round was asked for while one of this cluster ran: the running one starts a successor.
    round_pending = models.BooleanField(default=False)
    # GPU monitoring: card samples are taken up to this epoch second (the end of the last period).
    gpu_sampled_until = models.BigIntegerField(default=0, editable=False)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def delete(self, using: Any = None, keep_parents: bool = False) -> tuple[int, dict[str, int]]:
        """As `ClusterQuerySet.delete`: the row locked first, then deleted with its own rows."""
        if self.pk is None:
            raise ValueError(f"{self} can't be deleted: it was never saved")
        using = using or router.db_for_write(type(self), instance=self)
        with transaction.atomic(using=using):
            list(type(self).objects.filter(pk=self.pk).select_for_update().values_list("pk"))
            done = owned_rows_delete(type(self), [self.pk], using=using)
            if done is None:
                return super().delete(using=using, keep_parents=keep_parents)
            self.pk = None  # as Django leaves a deleted instance
            return done

    def clean(self) -> None:
        problems = check_args(self.scheduler_args, settings.KOORDWEB_SCHEDULER_PLUGINS)
        if problems:
            raise ValidationError({"scheduler_args": problem_lines(problems)})


class TopologyLayer(models.Model):
    """One entry of ClusterNetworkTopology `spec.networkTopologySpec` (the `default` object)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="topology_layers")
    name = models.CharField(max_length=63)
    parent_name = models.CharField(max_length=63, blank=True)
    label_keys = models.JSONField(default=list, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["cluster", "position"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="uniq_layer_name"),
        ]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A Kubernetes node: labels place it in the topology; resources are in integer units."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    labels = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    annotations = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    taints = models.JSONField(default=list, blank=True)
    allocatable = models.JSONField(default=dict, blank=True, validators=[validate_resource_list])
    capacity = models.JSONField(default=dict, blank=True, validators=[validate_resource_list])
    conditions = models.JSONField(default=list, blank=True)
    unschedulable = models.BooleanField(default=False)
    ready = models.BooleanField(default=True)
    # The metadata of the node's Koordinator Device CR: its partition table annotation and
    # partition-policy label are read from there first, as Koordinator does.
    device_labels = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    device_annotations = models.JSONField(
        default=dict, blank=True, validators=[validate_string_map]
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="uniq_node_name"),
        ]

    def __str__(self) -> str:
        return self.name


class Device(models.Model):
    """One device of a node's Koordinator `Device` CR (GPU, NPU and MLU are type `gpu`)."""

    class Type(models.TextChoices):
        GPU = "gpu", "gpu"
        RDMA = "rdma", "rdma"
        FPGA = "fpga", "fpga"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="devices")
    device_type = models.CharField(max_length=8, choices=Type.choices)
    vendor = models.CharField(max_length=32, blank=True)
    model = models.CharField(max_length=64, blank=True)
    minor = models.PositiveIntegerField()
    uuid = models.CharField(max_length=128, blank=True)
    health = models.BooleanField(default=True)
    labels = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    resources = models.JSONField(default=dict, blank=True, validators=[validate_resource_list])
    socket_id = models.IntegerField(null=True, blank=True)
    numa_node = models.IntegerField(null=True, blank=True)
    pcie_id = models.CharField(max_length=32, blank=True)
    bus_id = models.CharField(max_length=32, blank=True)
    vfs = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["node", "device_type", "minor"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "device_type", "minor"], name="uniq_device_minor"
            ),
        ]
        indexes = [models.Index(fields=["device_type", "vendor"])]

    def __str__(self) -> str:
        return f"{self.node.name}/{self.device_type}{self.minor}"


class NodeMetric(models.Model):
    """A NodeMetric report: node usage at a time, in integer units, GPU usage per minor."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="metrics")
    reported_at = models.DateTimeField()
    report_interval_seconds = models.PositiveIntegerField(default=60)
    usage = models.JSONField(default=dict, blank=True, validators=[validate_resource_list])
    gpu_usage = models.JSONField(default=dict, blank=True)
    # status.podsMetric: "namespace/name" -> the pod's reported usage (integer units); the
    # load-aware plugin counts a bound pod missing here at its full estimate.
    pod_usages = models.JSONField(default=dict, blank=True)
    # status.nodeMetric.aggregatedNodeUsages: {"p95": {"300": usage}} (type -> seconds -> usage).
    aggregated_usages = models.JSONField(default=dict, blank=True)
    # status.podsMetric[].podUsage.devices: {"namespace/name": {minor: resources}}
    pod_gpu_usage = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["node", "-reported_at"]
        indexes = [models.Index(fields=["node", "-reported_at"])]

    def __str__(self) -> str:
        when = self.reported_at.astimezone(UTC)
        return f"usage of node {self.node.name} reported {when:%Y-%m-%d %H:%M:%S} UTC"


def latest_node_metric_ids(metrics: models.QuerySet[NodeMetric] | None = None) -> Any:
    """Each node's latest NodeMetric among `metrics` (by default every report), as a subquery of
    ids: `NodeMetric.objects.filter(id__in=latest_node_metric_ids(...))`.

    The latest is the report written last (the highest id), which is the NodeMetric object the
    cluster holds now: a koordlet updates its node's one object in place. The engine's snapshot,
    the nodes page, the GPU sampling, the history pruning and the export all read this one."""
    reports = NodeMetric.objects.all() if metrics is None else metrics
    return reports.order_by().values("node_id").annotate(latest=models.Max("id")).values("latest")


class DeviceTemplateConfig(models.Model):
    """A vendor template ConfigMap (e.g. Ascend vNPU templates), kept whole for round-trips."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="device_templates")
    namespace = models.CharField(max_length=63, default="kube-system")
    name = models.CharField(max_length=253)
    labels = models.JSONField(default=dict, blank=True, validators=[validate_string_map])
    data = models.JSONField(default=dict, blank=True, validators=[validate_string_map])

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="uniq_template_config"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"
