"""Django admin for every model: list columns, filters and search an operator needs."""

from __future__ import annotations

from django.contrib import admin

from koordweb import models


@admin.register(models.Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "backend", "scheduler_name", "created_at")
    search_fields = ("name", "description")


@admin.register(models.TopologyLayer)
class TopologyLayerAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "parent_name", "label_keys", "position")
    list_filter = ("cluster",)


class DeviceInline(admin.TabularInline):
    model = models.Device
    extra = 0
    fields = ("device_type", "vendor", "model", "minor", "health", "numa_node", "pcie_id")


@admin.register(models.Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "unschedulable", "ready", "created_at")
    list_filter = ("cluster", "unschedulable", "ready")
    search_fields = ("name",)
    inlines = [DeviceInline]


@admin.register(models.Device)
class DeviceAdmin(admin.ModelAdmin):
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
class PriorityClassAdmin(admin.ModelAdmin):
    list_display = ("name", "value", "preemption_policy", "global_default", "cluster")
    list_filter = ("cluster", "preemption_policy")
    search_fields = ("name",)


@admin.register(models.ElasticQuota)
class ElasticQuotaAdmin(admin.ModelAdmin):
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
        "jobs_placed",
        "preemption_count",
    )
    list_filter = ("cluster", "state", "trigger")
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
