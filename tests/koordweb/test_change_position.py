"""The change position the warm snapshot reads moves forward with every write of a row, whoever
writes it: a new row, the bulk writers (which set it themselves on PostgreSQL, so the trigger's
PL/pgSQL call is skipped), the bind, and any ORM update (the trigger). A write that would move it
back is corrected. Each write commits on its own, as a round's transactions do."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.utils import timezone

from koordweb.backends.base import Binding, EnactPlan
from koordweb.backends.intents import intents_write
from koordweb.models import Intent, Job, JobState, Pod, PodPhase
from koordweb.rows.bulk import rows_set, rows_write
from koordweb.rows.pods import pods_bind
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _position(table: str, row_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT change_seq FROM {table} WHERE id = %s", [row_id])
        return int(cursor.fetchone()[0])


def _trigger_calls() -> int:
    """How often the change-position function ran in this transaction (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_function_calls('koordweb_change_seq'::regproc)")
        return int(cursor.fetchone()[0] or 0)


def test_every_writer_moves_the_position_forward() -> None:
    cluster = ClusterFactory()
    node = NodeFactory(cluster=cluster, name="n1")
    job = JobFactory(cluster=cluster)
    pod = PodFactory(job=job)
    seen = _position("koordweb_pod", pod.id)
    assert seen > 0, "a new row has a position"

    def moved(table: str, row_id: int, before: int) -> int:
        now = _position(table, row_id)
        assert now > before
        return now

    rows_write(Pod, ["phase"], [(pod.id, PodPhase.PENDING)])
    seen = moved("koordweb_pod", pod.id, seen)
    job_seen = _position("koordweb_job", job.id)
    rows_set(Job, [job.id], state=JobState.SCHEDULED)
    moved("koordweb_job", job.id, job_seen)
    now = timezone.now()
    plan = EnactPlan((Binding(pod.id, pod.namespace, pod.name, pod.uid, node.name, {}),))
    intents_write(cluster=cluster, round_id=None, plan=plan, now=now)
    assert pods_bind(intent_ids=[Intent.objects.get(pod=pod).id], now=now) == 1
    seen = moved("koordweb_pod", pod.id, seen)
    Pod.objects.filter(id=pod.id).update(priority=7)
    seen = moved("koordweb_pod", pod.id, seen)
    # A write that sets the position back (none of ours does) is moved forward again.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE koordweb_pod SET change_seq = 0 WHERE id = %s", [pod.id])
    moved("koordweb_pod", pod.id, seen)


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_bulk_writers_skip_the_trigger_call_and_the_orm_does_not() -> None:
    cluster = ClusterFactory()
    job = JobFactory(cluster=cluster)
    pods = [PodFactory(job=job) for _ in range(3)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if not cursor.fetchone()[0]:
            pytest.skip("counting function calls needs a superuser")
    for write, calls in (
        (lambda: rows_write(Pod, ["priority"], [(p.id, 5) for p in pods]), 0),
        (lambda: rows_set(Pod, [p.id for p in pods], priority=6), 0),
        (lambda: Pod.objects.filter(job=job).update(priority=7), 3),
    ):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL track_functions = 'pl'")
            write()
            write()  # a second write in the same transaction calls nothing more
            assert _trigger_calls() == calls
