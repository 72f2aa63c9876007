"""Django admin for every model: list columns, filters and search an operator needs."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from koordweb import models
from koordweb.presenters.quantities import amounts_text
from koordweb.presenters.reasons import decision_sentence, preemption_sentence
from koordweb.presenters.rounds import ms_text, round_metrics, snapshot_text
from koordweb.selectors.cascade import cascade_counts
from koordweb.selectors.leases import ago_text, lease_owner_text
from koordweb.services.ownership import (
    KOORDWEB_OWNED_FIELDS,
    cluster_of,
    cluster_owned_refusal,
)

LISTED_ROWS = 500  # a deletion taking more rows than this is shown as counts by kind


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


class RecordAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Rows that record what happened (or what a worker reports): read, never added or edited
    here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class RecordInline(admin.TabularInline):  # type: ignore[type-arg]
    """A record's rows shown under it, read-only."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


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
        return super().get_queryset(request).select_related("lease", "lease__owner")

    @admin.display(description="rounds run on")
    def round_owner(self, obj: models.Cluster) -> str:
        """The worker owning the cluster's rounds (cluster-affine workers), if its lease holds."""
        lease = getattr(obj, "lease", None)
        return lease_owner_text(lease, timezone.now()) if lease is not None else "-"

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """What deleting clusters takes with it. Django lists every row, each a link: for a
        cluster of 5,000 nodes that page took 5 s and 1.4 MB. Past `LISTED_ROWS` rows the page
        shows counts by kind instead."""
        counts = cascade_counts(self.model, list(objs))
        if sum(counts.values()) <= LISTED_ROWS:
            return super().get_deleted_objects(objs, request)
        perms_needed = {
            model._meta.verbose_name
            for model, count in counts.items()
            if count
            and not request.user.has_perm(
                f"{model._meta.app_label}.delete_{model._meta.model_name}"
            )
        }
        model_count = {
            model._meta.verbose_name_plural: count for model, count in counts.items() if count
        }
        listed = [f"{count:,} {name}" for name, count in sorted(model_count.items(), key=_by_count)]
        return [*(str(obj) for obj in objs), listed], model_count, perms_needed, []


@admin.register(models.RoundWorker)
class RoundWorkerAdmin(RecordAdmin):
    list_display = ("name", "alive", "last_heartbeat", "queue", "host", "pid", "started_at")
    readonly_fields = ("name", "queue", "host", "pid", "started_at", "seen_at", "expires_at")

    @admin.display(description="alive", boolean=True)
    def alive(self, obj: models.RoundWorker) -> bool:
        return bool(obj.expires_at and obj.expires_at > timezone.now())

    @admin.display(description="last heartbeat", ordering="seen_at")
    def last_heartbeat(self, obj: models.RoundWorker) -> str:
        return ago_text(obj.seen_at, timezone.now())


@admin.register(models.ClusterLease)
class ClusterLeaseAdmin(RecordAdmin):
    """Who runs each cluster's rounds. A lease is renewed at every heartbeat, so its expiry is
    seconds away while its owner lives; 'holds' says whether it counts now."""

    list_display = ("cluster", "owner", "holds", "acquired_at", "renewed_until", "generation")
    list_select_related = ("cluster", "owner")

    @admin.display(description="holds now")
    def holds(self, obj: models.ClusterLease) -> str:
        return lease_owner_text(obj, timezone.now())

    @admin.display(description="renewed until", ordering="expires_at")
    def renewed_until(self, obj: models.ClusterLease) -> str:
        return obj.expires_at.strftime("%H:%M:%S UTC") if obj.expires_at else "-"


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
    list_display = (
        "name",
        "namespace",
        "parent",
        "is_parent",
        "allow_lent",
        "max_pending_jobs",
        "max_pending_pods",
        "cluster",
    )
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


class DecisionInline(RecordInline):
    model = models.Decision
    fields = ("job", "outcome", "in_words")
    readonly_fields = ("job", "outcome", "in_words")

    @admin.display(description="reason")
    def in_words(self, obj: models.Decision) -> str:
        return decision_sentence(obj.outcome, obj.reason, obj.details).sentence


@admin.register(models.Round)
class RoundAdmin(RecordAdmin):
    """A round is a record of what happened: read it, never edit it (the round page says the
    same in more detail)."""

    list_display = (
        "id",
        "cluster",
        "state",
        "trigger",
        "started_at",
        "took",
        "worker",
        "cluster_state",
        "jobs_placed",
        "preemption_count",
    )
    list_filter = ("cluster", "state", "trigger", "worker")
    list_select_related = ("cluster",)
    date_hierarchy = "started_at"
    inlines = [DecisionInline]
    exclude = ("metrics",)
    readonly_fields = ("how_it_ran",)

    @admin.display(description="duration", ordering="duration_ms")
    def took(self, obj: models.Round) -> str:
        return ms_text(obj.duration_ms)

    @admin.display(description="cluster state")
    def cluster_state(self, obj: models.Round) -> str:
        return snapshot_text(obj.metrics or {}) or "-"

    @admin.display(description="how it ran")
    def how_it_ran(self, obj: models.Round) -> str:
        shown = round_metrics(obj.metrics, duration_ms=obj.duration_ms)
        lines = [f"{label}: {text}" for label, text in shown.lines]
        if shown.warning:
            lines.insert(0, shown.warning)
        return format_html_join(mark_safe("<br>"), "{}", ((line,) for line in lines)) or "-"


@admin.register(models.Decision)
class DecisionAdmin(RecordAdmin):
    """A decision is a record of a round: read in words, never edited (the job page says the
    same with its placements)."""

    list_display = ("job", "round", "outcome", "created_at")
    list_filter = ("outcome",)
    search_fields = ("job__name", "reason")
    # A round names its cluster: one query for the page, not one per row.
    list_select_related = ("job", "round__cluster")
    fields = ("round", "job", "outcome", "in_words", "created_at")
    readonly_fields = fields

    @admin.display(description="why")
    def in_words(self, obj: models.Decision) -> str:
        return decision_sentence(obj.outcome, obj.reason, obj.details).sentence


class VictimInline(RecordInline):
    model = models.PreemptionVictim
    fields = ("job", "pods_text", "freed_text")
    readonly_fields = fields

    @admin.display(description="pods evicted")
    def pods_text(self, obj: models.PreemptionVictim) -> str:
        return ", ".join(obj.pods) if obj.pods else "none"

    @admin.display(description="resources freed")
    def freed_text(self, obj: models.PreemptionVictim) -> str:
        return amounts_text(obj.freed or {})


@admin.register(models.Preemption)
class PreemptionAdmin(RecordAdmin):
    """A preemption is a record of a round: its rule and reason in words, its victims with what
    they freed; never edited."""

    list_display = ("preemptor", "state", "created_at", "round")
    list_filter = ("cluster", "state")
    search_fields = ("preemptor__name", "reason")
    list_select_related = ("preemptor", "round__cluster")
    fields = ("cluster", "round", "preemptor", "state", "in_words", "nominated", "created_at")
    readonly_fields = fields
    inlines = [VictimInline]

    @admin.display(description="why")
    def in_words(self, obj: models.Preemption) -> str:
        return preemption_sentence(obj.reason, obj.cost)

    @admin.display(description="nodes held for the preemptor")
    def nominated(self, obj: models.Preemption) -> str:
        pairs = sorted((obj.nominations or {}).items())
        return "; ".join(f"{pod} on {node}" for pod, node in pairs) if pairs else "none"
