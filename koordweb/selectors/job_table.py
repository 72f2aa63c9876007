"""The jobs table both doors read: one filterset for the API's job list and the jobs page.

As NetBox does, one FilterSet per model serves the UI and the API (`koordweb.api.filters`
re-exports it; views may not import the API layer). The page adds what a table needs on top:
the cards each job asks for and how long it waited (annotations, so the database sorts by
them), the sort orders people use (`JOB_SORTS`), and each waiting job's place in the queue as
the engine's last round took it (`job_queue_positions`, published by `engine.round_queue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import django_filters
from django.core.cache import caches
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

from koordweb.engine.round_queue import QUEUE_PUBLISHED, round_queue_key
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


# Sort orders of the table (the "#" column is the engine's queue place, `engine.round_queue`).
QUEUE_ORDER = ("-priority", "submitted_at", "namespace", "name")
JOB_SORTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "queue": ("priority, then submission time", QUEUE_ORDER),
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


@dataclass(frozen=True)
class QueuePlace:
    """A waiting job's place in the queue as the table shows it: `number` (1 = next) or, when
    it has none, the words that say why; `estimated` when no round has published the queue
    (the number then follows priority, then submission time)."""

    number: int | None
    words: str = ""
    estimated: bool = False

    def __str__(self) -> str:
        return str(self.number) if self.number is not None else self.words


HELD_WORDS = "waiting for a change"  # held back by the back-off: not sorted this round
NEW_WORDS = "next round"  # submitted after the last round read the cluster
MORE_WORDS = f"after the first {QUEUE_PUBLISHED:,}"


@dataclass(frozen=True)
class PublishedQueue:
    """What a cluster's last round published (`engine.round_queue.round_queue_publish`)."""

    places: Mapping[int, int]
    held: frozenset[int]
    as_of: datetime
    more: bool


def published_queue(cluster_id: int, created: datetime) -> PublishedQueue | None:
    """The queue the cluster's last round published in the shared cache; None when there is
    none (no round since the cache was cleared) or it is another cluster's of the same id."""
    value = caches["default"].get(round_queue_key(cluster_id))
    if not isinstance(value, dict):
        return None
    try:
        if datetime.fromisoformat(value["cluster_created"]) != created:
            return None
        return PublishedQueue(
            places={int(pk): int(place) for pk, place in value["places"].items()},
            held=frozenset(int(pk) for pk in value["held"]),
            as_of=datetime.fromisoformat(value["as_of"]),
            more=bool(value["more"]),
        )
    except (AttributeError, KeyError, TypeError, ValueError):
        return None  # another format: read as nothing published


def job_queue_positions(jobs: QuerySet[Job]) -> dict[int, QueuePlace]:
    """Each waiting job's place in the scheduling queue (1 = next), among `jobs`: the order the
    engine took them in its cluster's last round (the rows of one gang group share a place).
    Held back by the back-off, submitted since that round or beyond the places published, a
    job has words instead of a number. Before any round the place is estimated from priority,
    then submission time."""
    waiting = jobs.filter(state__in=JobState.WAITING).order_by(*QUEUE_ORDER)
    by_cluster: dict[tuple[int, datetime], list[tuple[int, datetime]]] = {}
    for pk, cluster_id, created, submitted in waiting.values_list(
        "pk", "cluster_id", "cluster__created_at", "submitted_at"
    ):
        by_cluster.setdefault((cluster_id, created), []).append((pk, submitted))
    positions: dict[int, QueuePlace] = {}
    for (cluster_id, created), rows in by_cluster.items():
        queue = published_queue(cluster_id, created)
        if queue is None:
            for place, (pk, _) in enumerate(rows, start=1):
                positions[pk] = QueuePlace(place, estimated=True)
        else:
            positions.update(_engine_places(queue, rows))
    return positions


def _engine_places(
    queue: PublishedQueue, rows: list[tuple[int, datetime]]
) -> dict[int, QueuePlace]:
    """The rows' places in the published queue, numbered among them (tied places stay tied)."""
    placed = sorted((queue.places[pk], pk) for pk, _ in rows if pk in queue.places)
    out: dict[int, QueuePlace] = {}
    number, last = 0, None
    for place, pk in placed:
        if place != last:
            number, last = number + 1, place
        out[pk] = QueuePlace(number)
    for pk, submitted in rows:
        if pk in out:
            continue
        if pk in queue.held:
            out[pk] = QueuePlace(None, HELD_WORDS)
        elif submitted > queue.as_of:
            out[pk] = QueuePlace(None, NEW_WORDS)
        elif queue.more:
            out[pk] = QueuePlace(None, MORE_WORDS)
    return out


def cluster_priority_classes(cluster: Cluster) -> QuerySet[PriorityClass]:
    """The cluster's priority classes, highest value first (the table's priority filter)."""
    return PriorityClass.objects.filter(cluster=cluster).order_by("-value")
