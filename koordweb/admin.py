"""Django admin for every model: list columns, filters and search an operator needs."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from koordweb import models
from koordweb.selectors.leases import lease_owner_text
from koordweb.services.ownership import (
    KOORDWEB_OWNED_FIELDS,
    cluster_of,
    cluster_owned_refusal,
)


class ClusterOwnedAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Rows a Kubernetes cluster owns are shown read-only (but for koordweb's own fields),
    cannot be deleted, and cannot be added to such a cluster: the form says where to edit."""

    def _refusal(self, obj: Any, fields: Any = None) -> str | None:
        return cluster_owned_refusal(cluster_of(obj), self.model, fields) if obj else None

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if not self._refusal(obj):
            return super().get_readonly_fields(request, obj)
        own = KOORDWEB_OWNED_FIELDS.get(self.model.__name__, frozenset())
        return [f.name for f in self.model._meta.get_fields() if f.name not in own]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not self._refusal(obj) and super().has_delete_permission(request, obj)

    def change_view(self, request: HttpRequest, object_id: str, *args: Any, **kwargs: Any) -> Any:
        obj = self.get_object(request, object_id)
        why = self._refusal(obj)
        if why and request.method == "GET":
            messages.info(request, why[0].upper() + why[1:] + ".")
        return super().change_view(request, object_id, *args, **kwargs)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        model = self.model

        class Guarded(form):  # type: ignore[misc, valid-type]
            def clean(self) -> Any:
                data = super().clean()
                if self.instance.pk is None:
                    cluster = data.get("cluster") or getattr(data.get("node"), "cluster", None)
                    why = cluster_owned_refusal(cluster, model)
                    if why:
                        raise forms.ValidationError(why[0].upper() + why[1:] + ".")
                return data

        return Guarded


@admin.register(models.Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "backend", "scheduler_name", "round_owner", "created_at")
    search_fields = ("name", "description")

    def get_queryset(self, request: HttpRequest) -> QuerySet[models.Cluster]:
        return super().get_queryset(request).select_related("lease")

    @admin.display(description="rounds run on")
    def round_owner(self, obj: models.Cluster) -> str:
        """The worker owning the cluster's rounds (cluster-affine workers), if its lease holds."""
        lease = getattr(obj, "lease", None)
        return lease_owner_text(lease, timezone.now()) if lease is not None else "-"


@admin.register(models.RoundWorker)
class RoundWorkerAdmin(admin.ModelAdmin):
    list_display = ("name", "queue", "host", "pid", "started_at", "seen_at", "expires_at")
    readonly_fields = ("name", "queue", "host", "pid", "started_at", "seen_at", "expires_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(models.ClusterLease)
class ClusterLeaseAdmin(admin.ModelAdmin):
    list_display = ("cluster", "owner", "generation", "acquired_at", "expires_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(models.TopologyLayer)
class TopologyLayerAdmin(ClusterOwnedAdmin):
    list_display = ("name", "cluster", "parent_name", "label_keys", "position")
    list_filter = ("cluster",)


class DeviceInline(admin.TabularInline):
    model = models.Device
    extra = 0
    fields = ("device_type", "vendor", "model", "minor", "health", "numa_node", "pcie_id")


@admin.register(models.Node)
class NodeAdmin(ClusterOwnedAdmin):
    list_display = ("name", "cluster", "unschedulable", "ready", "created_at")
    list_filter = ("cluster", "unschedulable", "ready")
    search_fields = ("name",)
    inlines = [DeviceInline]


@admin.register(models.Device)
class DeviceAdmin(ClusterOwnedAdmin):
    list_display = ("node", "device_type", "vendor", "model", "minor", "health", "numa_node")
    list_filter = ("device_type", "vendor", "model", "health")
    search_fields = ("node__name", "uuid", "bus_id")
    list_select_related = ("node",)


@admin.register(models.NodeMetric)
class NodeMetricAdmin(admin.ModelAdmin):
    list_display = ("node", "reported_at", "report_interval_seconds")
    search_fields = ("node__name",)
    list_select_related = ("node",)


@admin.register(models.DeviceTemplateConfig)
class DeviceTemplateConfigAdmin(admin.ModelAdmin):
    list_display = ("name", "namespace", "cluster")


@admin.register(models.PriorityClass)
class PriorityClassAdmin(ClusterOwnedAdmin):
    list_display = ("name", "value", "preemption_policy", "global_default", "cluster")
    list_filter = ("cluster", "preemption_policy")
    search_fields = ("name",)


@admin.register(models.ElasticQuota)
class ElasticQuotaAdmin(ClusterOwnedAdmin):
    list_display = ("name", "namespace", "parent", "is_parent", "allow_lent", "cluster")
    list_filter = ("cluster", "is_parent", "allow_lent")
    search_fields = ("name", "namespace")
    filter_horizontal = ("members",)


class PodInline(admin.TabularInline):
    model = models.Pod
    extra = 0
    fields = ("name", "phase", "node", "nominated_node", "priority")
    raw_id_fields = ("node", "nominated_node")


@admin.register(models.Job)
class JobAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "namespace",
        "state",
        "priority",
        "quota",
        "min_available",
        "total_number",
        "submitted_at",
    )
    list_filter = ("cluster", "state", "kind", "mode", "priority_class")
    search_fields = ("name", "namespace", "gang_group")
    date_hierarchy = "submitted_at"
    list_select_related = ("quota",)
    inlines = [PodInline]


@admin.register(models.Pod)
class PodAdmin(admin.ModelAdmin):
    list_display = ("name", "namespace", "phase", "node", "nominated_node", "priority", "job")
    list_filter = ("cluster", "phase")
    search_fields = ("name", "namespace", "job__name")
    raw_id_fields = ("job", "node", "nominated_node")
    list_select_related = ("node", "nominated_node", "job")


@admin.register(models.PodDisruptionBudget)
class PodDisruptionBudgetAdmin(admin.ModelAdmin):
    list_display = ("name", "namespace", "min_available", "max_unavailable", "cluster")
    search_fields = ("name", "namespace")


class DecisionInline(admin.TabularInline):
    model = models.Decision
    extra = 0
    fields = ("job", "outcome", "reason")
    raw_id_fields = ("job",)


@admin.register(models.Round)
class RoundAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "cluster",
        "state",
        "trigger",
        "started_at",
        "duration_ms",
        "worker",
        "jobs_placed",
        "preemption_count",
    )
    list_filter = ("cluster", "state", "trigger", "worker")
    date_hierarchy = "started_at"
    inlines = [DecisionInline]


@admin.register(models.Decision)
class DecisionAdmin(admin.ModelAdmin):
    list_display = ("job", "round", "outcome", "created_at")
    list_filter = ("outcome",)
    search_fields = ("job__name", "reason")
    raw_id_fields = ("job", "round")


class VictimInline(admin.TabularInline):
    model = models.PreemptionVictim
    extra = 0
    raw_id_fields = ("job",)


@admin.register(models.Preemption)
class PreemptionAdmin(admin.ModelAdmin):
    list_display = ("preemptor", "state", "created_at", "round")
    list_filter = ("cluster", "state")
    search_fields = ("preemptor__name", "reason")
    raw_id_fields = ("preemptor", "round")
    inlines = [VictimInline]
