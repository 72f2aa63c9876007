"""The jobs table both doors read: one filterset for the API's job list and the jobs page.

As NetBox does, one FilterSet per model serves the UI and the API (`koordweb.api.filters`
re-exports it; views may not import the API layer). The page adds what a table needs on top:
the cards each job asks for and how long it waited (annotations, so the database sorts by
them), and the sort orders people use (`JOB_SORTS`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django.db.models import (
    DateTimeField,
    Exists,
    F,
    FloatField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, Greatest
from rest_framework.exceptions import ValidationError

from koordweb.models import Cluster, Job, JobState, Pod, PriorityClass
from koordweb.models.records import latest_decision
from scheduler.vocabulary import (
    CAMBRICON_MLU,
    CAMBRICON_MLU_VCORE,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    HUAWEI_NPU,
    KOORD_GPU,
    NPU_CORE,
    NVIDIA_GPU,
)

# Ids and integers in filters stay within the database's 64-bit range (else the query overflows).
MAX_ID = 2**63 - 1

# Groups of states the page's links name ("active": holding nodes; "pending": waiting) beside
# the states themselves; "all" filters nothing.
STATE_GROUPS: dict[str, frozenset[str]] = {
    "active": frozenset(JobState.HOLDING),
    "pending": frozenset(JobState.WAITING),
}
STATE_CHOICES = [
    ("active", "active (holding nodes)"),
    ("pending", "waiting for a placement"),
    ("all", "all states"),
    *JobState.choices,
]

# Each kind of accelerator a job may ask for, by the resources its pods request.
DEVICE_KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "gpu": ("NVIDIA GPU", (NVIDIA_GPU,)),
    "gpu-share": (
        "GPU share or GPU memory",
        (GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED, KOORD_GPU),
    ),
    "npu": ("Ascend NPU", (HUAWEI_NPU, NPU_CORE)),
    "mlu": ("Cambricon MLU", (CAMBRICON_MLU, CAMBRICON_MLU_VCORE)),
    "none": ("no accelerator", ()),
}
_ACCELERATORS = tuple(name for _, names in DEVICE_KINDS.values() for name in names)


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 instant, compared in UTC: PostgreSQL refuses offsets past +/-15:59 that
    Python accepts (up to 24 h), so the offset is resolved before the query."""

    def filter(self, qs: Any, value: Any) -> Any:
        if isinstance(value, datetime) and value.tzinfo is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:
                raise ValidationError({self.parameter(): ["date and time out of range"]}) from None
        return super().filter(qs, value)

    def parameter(self) -> str:
        """The query parameter this filter reads (its name in the filter set), as clients send
        it: `submitted_after`, not the field `submitted_at`."""
        parent = getattr(self, "parent", None)
        for name, candidate in getattr(parent, "filters", {}).items():
            if candidate is self:
                return str(name)
        return str(self.field_name)


def _asks_for(resources: tuple[str, ...]) -> Q:
    """A pod that requests any of the resources."""
    found = Q(pk__in=[])
    for name in resources:
        found |= Q(requests__has_key=name)
    return found


class JobFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=STATE_CHOICES, method="filter_state")
    quota = django_filters.CharFilter(field_name="quota__name")
    team = django_filters.CharFilter(field_name="quota__name", label="Team (quota)")
    priority_class = django_filters.CharFilter(field_name="priority_class__name")
    priority = django_filters.NumberFilter(min_value=-MAX_ID, max_value=MAX_ID)
    device = django_filters.ChoiceFilter(
        choices=[(key, label) for key, (label, _) in DEVICE_KINDS.items()],
        method="filter_device",
        label="Device",
    )
    namespace = django_filters.CharFilter()
    cluster = django_filters.CharFilter(field_name="cluster__name")
    submitted_after = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="lt")
    name = django_filters.CharFilter(lookup_expr="icontains")
    q = django_filters.CharFilter(method="filter_search", label="Search", max_length=253)

    class Meta:
        model = Job
        fields = ["state", "quota", "priority_class", "namespace", "cluster"]

    def filter_state(self, queryset: QuerySet[Job], name: str, value: list[str]) -> QuerySet[Job]:
        if "all" in value:
            return queryset
        states: set[str] = set()
        for chosen in value:
            states |= STATE_GROUPS.get(chosen, frozenset({chosen}))
        return queryset.filter(state__in=states)

    def filter_device(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        pods = Pod.objects.filter(job=OuterRef("pk"))
        if value == "none":
            return queryset.exclude(Exists(pods.filter(_asks_for(_ACCELERATORS))))
        return queryset.filter(Exists(pods.filter(_asks_for(DEVICE_KINDS[value][1]))))

    def filter_search(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        return queryset.filter(Q(name__icontains=value) | Q(namespace__icontains=value))


def _request(resource: str) -> Coalesce:
    return Coalesce(Cast(KeyTextTransform(resource, "requests"), FloatField()), Value(0.0))


def job_cards() -> Subquery:
    """The accelerator cards a job's pods ask for, all together: whole cards (GPUs, NPUs,
    MLUs), or a GPU core share in hundredths of a card (the ledger's count,
    `selectors.preemptions.gpu_count`)."""
    whole = _request(NVIDIA_GPU) + _request(HUAWEI_NPU) + _request(CAMBRICON_MLU)
    per_pod = Greatest(whole, _request(GPU_CORE) / Value(100.0))
    summed = (
        Pod.objects.filter(job=OuterRef("pk"))
        .order_by()
        .values("job")
        .annotate(cards=Sum(per_pod, output_field=FloatField()))
        .values("cards")
    )
    return Subquery(summed, output_field=FloatField())


# Sort orders of the table: the scheduling order first (priority, then submission).
QUEUE_ORDER = ("-priority", "submitted_at", "namespace", "name")
JOB_SORTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "queue": ("scheduling order", QUEUE_ORDER),
    "-wait": ("longest wait first", ("-wait", *QUEUE_ORDER)),
    "wait": ("shortest wait first", ("wait", *QUEUE_ORDER)),
    "-gpus": ("most cards first", ("-gpus", *QUEUE_ORDER)),
    "gpus": ("fewest cards first", ("gpus", *QUEUE_ORDER)),
    "priority": ("lowest priority first", ("priority", "submitted_at", "namespace", "name")),
    "-submitted": ("newest first", ("-submitted_at", "namespace", "name")),
}


def job_table(jobs: QuerySet[Job], *, now: datetime, sort: str = "queue") -> QuerySet[Job]:
    """Jobs with what the table shows and sorts by: `wait` (submission to start, or to now
    while it waits), `gpus` (cards asked for) and `last_decision_id`."""
    started = Coalesce(F("started_at"), F("finished_at"), Value(now, output_field=DateTimeField()))
    table = jobs.annotate(
        wait=started - F("submitted_at"),
        gpus=Coalesce(job_cards(), Value(0.0)),
        last_decision_id=latest_decision("id"),
    )
    return table.order_by(*JOB_SORTS.get(sort, JOB_SORTS["queue"])[1])


def job_queue_positions(jobs: QuerySet[Job]) -> dict[int, int]:
    """Each waiting job's place in the scheduling queue (1 = next), among `jobs`."""
    waiting = jobs.filter(state__in=JobState.WAITING).order_by(*QUEUE_ORDER)
    return {pk: place for place, pk in enumerate(waiting.values_list("pk", flat=True), start=1)}


def cluster_priority_classes(cluster: Cluster) -> QuerySet[PriorityClass]:
    """The cluster's priority classes, highest value first (the table's priority filter)."""
    return PriorityClass.objects.filter(cluster=cluster).order_by("-value")
