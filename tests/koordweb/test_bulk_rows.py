"""The hot path's row writers and the `__any` lookup give what the ORM would, on either database.

On PostgreSQL they bypass Django's cursor (COPY, arrays bound on the server): these tests read the
rows back through the ORM, so a value converted wrongly (a JSON field, a choice, a time, a null)
fails here rather than in a round.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from koordweb.models import Intent, Job, JobState, Pod, PodPhase, Round
from koordweb.rows.bulk import rows_insert, rows_insert_ids, rows_set, rows_update, rows_write
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory

pytestmark = pytest.mark.django_db


def test_rows_insert_then_set_round_trip_every_kind_of_value() -> None:
    cluster = ClusterFactory()
    pods = PodFactory.create_batch(3, job=JobFactory(cluster=cluster))
    now = timezone.now()
    rnd = Round.objects.create(cluster=cluster, trigger="manual", started_at=now)
    payloads = [{"annotations": {"a": "1"}, "labels": {}}, {}, {"nested": [1, {"x": None}]}]
    rows_insert(
        Intent,
        (
            "cluster",
            "round",
            "pod",
            "kind",
            "step",
            "state",
            "node",
            "uid",
            "payload",
            "outcome",
            "created_at",
        ),
        [
            (
                cluster.id,
                rnd.id,
                pod.id,
                Intent.Kind.BIND,
                1,
                Intent.State.PENDING,
                "n",
                "",
                payload,
                "",
                now,
            )
            for pod, payload in zip(pods, payloads, strict=True)
        ],
    )
    stored = list(Intent.objects.filter(round=rnd).order_by("pod_id"))
    assert [i.payload for i in stored] == payloads
    assert {i.kind for i in stored} == {"bind"} and {i.created_at for i in stored} == {now}

    ids = [i.id for i in stored[:2]]
    assert rows_set(Intent, ids, state=Intent.State.DONE, outcome="it's done", done_at=now) == 2
    states = dict(Intent.objects.filter(round=rnd).values_list("id", "state"))
    assert [states[i] for i in ids] == ["done", "done"]
    assert states[stored[2].id] == "pending"
    assert Intent.objects.get(id=ids[0]).outcome == "it's done"
    assert rows_set(Intent, [], state=Intent.State.DONE) == 0


def test_rows_write_and_update_set_fields_of_many_rows() -> None:
    cluster = ClusterFactory()
    node = NodeFactory(cluster=cluster)
    pods = PodFactory.create_batch(3, job=JobFactory(cluster=cluster))
    now = timezone.now()
    rows_write(
        Pod,
        ["node", "nominated_node", "bound_at", "annotations", "phase"],
        [
            (p.id, node.id, None, now - timedelta(seconds=i), {"k": str(i)}, PodPhase.RUNNING)
            for i, p in enumerate(pods)
        ],
    )
    stored = {p.id: p for p in Pod.objects.filter(cluster=cluster)}
    for i, pod in enumerate(pods):
        row = stored[pod.id]
        assert (row.node_id, row.nominated_node_id, row.phase) == (node.id, None, "Running")
        assert row.bound_at == now - timedelta(seconds=i)
        assert row.annotations == {"k": str(i)}

    job = pods[0].job
    job.state = JobState.RUNNING
    job.started_at = now
    rows_update(Job, [job], ["state", "started_at"])
    job.refresh_from_db()
    assert (job.state, job.started_at) == ("Running", now)


def test_rows_write_inside_a_rolled_back_transaction_leaves_nothing() -> None:
    pod = PodFactory()
    with pytest.raises(RuntimeError), transaction.atomic():
        rows_write(Pod, ["annotations"], [(pod.id, {"written": "yes"})])
        raise RuntimeError("the round failed")
    pod.refresh_from_db()
    assert pod.annotations == {}


def test_any_lookup_matches_in() -> None:
    cluster = ClusterFactory()
    jobs = JobFactory.create_batch(3, cluster=cluster)
    pods = [PodFactory(job=job) for job in jobs for _ in range(2)]
    wanted = [jobs[0].id, jobs[2].id]
    by_any = set(Pod.objects.filter(job__id__any=wanted).values_list("id", flat=True))
    by_in = set(Pod.objects.filter(job_id__in=wanted).values_list("id", flat=True))
    assert by_any == by_in and len(by_any) == 4
    assert set(Pod.objects.filter(id__any=[pods[1].id]).values_list("id", flat=True)) == {
        pods[1].id
    }
    assert not Pod.objects.filter(id__any=[]).exists()


def test_rows_read_equals_values_list() -> None:
    from koordweb.engine.cluster_rows import POD_FIELDS
    from koordweb.rows.read import rows_read

    cluster = ClusterFactory()
    node = NodeFactory(cluster=cluster)
    job = JobFactory(cluster=cluster)
    PodFactory(job=job, labels={"team": "a"}, tolerations=[{"key": "gpu"}], node=node)
    PodFactory(job=job, labels={"team": "a"}, bound_at=timezone.now())
    PodFactory(job=job, annotations={"x": "1"}, topology_index=3)
    query = Pod.objects.filter(cluster=cluster).order_by("id").values_list(*POD_FIELDS)
    read = rows_read(query)
    assert read == list(query) and len(read) == 3
    labels = POD_FIELDS.index("labels")
    # Equal JSON texts are decoded once: the two rows share the object.
    assert read[0][labels] is read[1][labels]
    assert rows_read(Pod.objects.none().values_list("id")) == []


ODD_TEXTS = ['say "hi"', "back\\slash", "a,b", "{braces}", "NULL", "", "ünï ✓", " lead", "x\ny"]


def test_rows_write_carries_texts_an_array_literal_must_escape() -> None:
    cluster = ClusterFactory()
    pods = PodFactory.create_batch(len(ODD_TEXTS), job=JobFactory(cluster=cluster))
    rows_write(
        Pod,
        ["annotations", "uid"],
        [
            (p.id, {"note": text, text: "key"}, text)
            for p, text in zip(pods, ODD_TEXTS, strict=True)
        ],
    )
    stored = {p.id: p for p in Pod.objects.filter(cluster=cluster)}
    for pod, text in zip(pods, ODD_TEXTS, strict=True):
        assert stored[pod.id].annotations == {"note": text, text: "key"}
        assert stored[pod.id].uid == text


def test_rows_delete_removes_only_the_rows_named() -> None:
    from koordweb.rows.bulk import rows_delete

    pods = PodFactory.create_batch(3)
    now = timezone.now()
    Intent.objects.bulk_create(
        Intent(cluster_id=p.cluster_id, pod=p, kind="bind", step=1, created_at=now) for p in pods
    )
    ids = sorted(Intent.objects.values_list("id", flat=True))
    assert rows_delete(Intent, ids[:2]) == 2
    assert list(Intent.objects.values_list("id", flat=True)) == ids[2:]
    assert rows_delete(Intent, []) == 0


def test_array_literals_quote_and_refuse() -> None:
    from koordweb.rows.arrays import array_literal, int_array_literal

    assert int_array_literal([3, 1]) == "{3,1}" and int_array_literal([]) == "{}"
    assert array_literal([None, True, 2, 'a"b\\c']) == '{NULL,t,2,"a\\"b\\\\c"}'
    with pytest.raises(TypeError, match="no array literal for a dict"):
        array_literal([{"a": 1}])


def test_any_lookup_takes_more_ids_than_sqlite_has_variables() -> None:
    # A round can bind more pods than SQLite's 32,766 statement variables.
    pod = PodFactory()
    ids = [pod.id, *range(10**9, 10**9 + 40_000)]
    assert list(Pod.objects.filter(id__any=ids).values_list("id", flat=True)) == [pod.id]


def test_rows_insert_ids_names_each_row_and_later_inserts_get_new_ids() -> None:
    cluster = ClusterFactory()
    pods = PodFactory.create_batch(4, job=JobFactory(cluster=cluster))
    now = timezone.now()
    fields = ("cluster", "pod", "kind", "step", "state", "node", "uid", "payload", "outcome")
    fields += ("created_at",)
    rows = [
        (cluster.id, pod.id, Intent.Kind.BIND, 1, "pending", f"node-{k}", "", {"k": k}, "", now)
        for k, pod in enumerate(pods)
    ]
    ids = rows_insert_ids(Intent, fields, rows)
    assert len(set(ids)) == 4
    stored = {i.id: i for i in Intent.objects.all()}
    assert set(stored) == set(ids)
    for k, (intent_id, pod) in enumerate(zip(ids, pods, strict=True)):
        assert (stored[intent_id].pod_id, stored[intent_id].node) == (pod.id, f"node-{k}")
        assert stored[intent_id].payload == {"k": k}
    later = Intent.objects.create(
        cluster=cluster, pod=pods[0], kind=Intent.Kind.BIND, step=1, created_at=now
    )
    assert later.id not in ids
    assert rows_insert_ids(Intent, fields, []) == []
