"""`rows_read`, which the warm snapshot reads its changed rows with, converts column by column (a
JSON column's distinct texts decoded once each): whatever the values, the rows must be what
`values_list` gives, value for value and type for type."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from koordweb.engine import cluster_rows
from koordweb.models import ElasticQuota, Intent, Pod
from koordweb.rows.read import json_column, rows_read
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory

pytestmark = pytest.mark.django_db

# JSON documents of every kind, some equal, scalars that compare equal across types among them.
PAYLOADS = [
    {"a": 1},
    {"a": 1},
    {},
    [],
    1,
    True,
    1.0,
    0,
    False,
    "1",
    "true",
    "",
    {"nested": [1, {"x": None}], "ü": "✓"},
    [1, True, 1.0],
]


def typed(rows: list) -> str:
    """Rows as text that tells 1, 1.0 and True apart."""
    return repr(rows)


def test_rows_read_gives_values_list_rows_for_json_of_every_kind() -> None:
    cluster = ClusterFactory()
    pods = PodFactory.create_batch(len(PAYLOADS), job=JobFactory(cluster=cluster))
    now = timezone.now()
    Intent.objects.bulk_create(
        Intent(cluster=cluster, pod=pod, kind="bind", step=1, created_at=now, payload=payload)
        for pod, payload in zip(pods, PAYLOADS, strict=True)
    )
    query = Intent.objects.filter(cluster=cluster).order_by("id").values_list("id", "payload")
    read = rows_read(query)
    assert typed(read) == typed(list(query))
    assert [payload for _id, payload in read] == PAYLOADS
    assert read[0][1] is read[1][1]  # equal texts: one object


def test_rows_read_gives_values_list_rows_with_sql_nulls() -> None:
    cluster = ClusterFactory()
    for name, weight in (("a", None), ("b", {"cpu": 1}), ("c", None), ("d", {"cpu": 1})):
        ElasticQuota.objects.create(cluster=cluster, name=name, shared_weight=weight)
    query = (
        ElasticQuota.objects.filter(cluster=cluster)
        .order_by("name")
        .values_list("id", "name", "min", "shared_weight", "allow_lent")
    )
    assert typed(rows_read(query)) == typed(list(query))


def test_rows_read_makes_named_rows_equal_to_values_list_ones() -> None:
    cluster = ClusterFactory()
    node = NodeFactory(cluster=cluster)
    job = JobFactory(cluster=cluster)
    PodFactory(job=job, labels={"team": "a"}, tolerations=[{"key": "gpu"}], node=node)
    PodFactory(job=job, labels={"team": "a"}, bound_at=timezone.now(), nominated_node=node)
    PodFactory(job=job, annotations={"x": "1"}, topology_index=3, affinity={"a": [1]})
    query = Pod.objects.filter(cluster=cluster).order_by("id").values_list(*cluster_rows.POD_FIELDS)
    read = rows_read(query, cluster_rows.PodRow._make)
    assert read == [cluster_rows.PodRow(*row) for row in query]
    assert all(type(row) is cluster_rows.PodRow for row in read)
    assert typed(read) == typed([cluster_rows.PodRow(*row) for row in query])
    assert rows_read(Pod.objects.none().values_list("id"), cluster_rows.PodRow._make) == []


def test_a_json_column_decodes_as_each_value_alone() -> None:
    texts = [json.dumps(p) for p in PAYLOADS]
    values = [*texts, None, *texts]
    assert typed(json_column(values, None)) == typed(
        [None if v is None else json.loads(v) for v in values]
    )
    # Values a driver decoded itself are kept as they are, hashable or not, 1 apart from True.
    decoded = [1, True, 1.0, None, 0, False]
    assert typed(json_column(decoded, None)) == typed(decoded)
    assert typed(json_column([{"a": 1}, ["x"], 1, True], None)) == typed([{"a": 1}, ["x"], 1, True])
