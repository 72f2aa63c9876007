"""Migration 0019 (PostgreSQL): deletions of the tracked tables are logged for the warm snapshot
by one statement-level trigger reading the deleted rows as a transition table; going back
restores migration 0008's trigger per row. Either way every deleted row is logged once, with the
deleting transaction's position. SQLite keeps its own triggers both ways."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction

from koordweb.models import Pod
from tests.builders import ClusterFactory, JobFactory, PodFactory
from tests.koordweb.schema import migrate_to, table_triggers, trigger_definition

BEFORE = [("koordweb", "0018_pod_terminating_active_index")]
TABLES = ("koordweb_node", "koordweb_pod", "koordweb_job", "koordweb_nodemetric", "koordweb_device")


def _logged(ids: list[int]) -> list[tuple[str, int, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, row_id, change_seq FROM koordweb_deleted_row "
            "WHERE table_name = 'koordweb_pod' AND row_id = ANY(%s) ORDER BY row_id"
            if connection.vendor == "postgresql"
            else "SELECT table_name, row_id, change_seq FROM koordweb_deleted_row "
            f"WHERE table_name = 'koordweb_pod' AND row_id IN ({', '.join(['%s'] * len(ids))}) "
            "ORDER BY row_id",
            [ids] if connection.vendor == "postgresql" else ids,
        )
        return [tuple(row) for row in cursor.fetchall()]


@pytest.mark.django_db(transaction=True)
def test_deletion_log_trigger_per_statement_and_back(latest: Any) -> None:
    triggers = {table: table_triggers(table) for table in TABLES}
    if connection.vendor == "postgresql":
        for table in TABLES:
            definition = trigger_definition(table, f"{table}_deleted")
            assert "REFERENCING OLD TABLE AS gone FOR EACH STATEMENT" in definition
            assert "koordweb_rows_deleted()" in definition

    migrate_to(BEFORE)
    assert {table: table_triggers(table) for table in TABLES} == triggers
    if connection.vendor == "postgresql":
        for table in TABLES:
            definition = trigger_definition(table, f"{table}_deleted")
            assert "FOR EACH ROW EXECUTE FUNCTION koordweb_row_deleted()" in definition

    migrate_to(latest)
    assert {table: table_triggers(table) for table in TABLES} == triggers


@pytest.mark.django_db(transaction=True)
def test_every_row_of_a_deletion_is_logged_once_after_its_last_write() -> None:
    job = JobFactory(cluster=ClusterFactory())
    pods = [PodFactory(job=job, name=f"p{i}") for i in range(4)]
    gone = [p.id for p in pods[:3]]
    with connection.cursor() as cursor:
        cursor.execute("SELECT MAX(change_seq) FROM koordweb_pod")
        before = cursor.fetchone()[0]
    superuser = False
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            superuser = bool(cursor.fetchone()[0])
    with transaction.atomic(), connection.cursor() as cursor:
        if superuser:
            cursor.execute("SET LOCAL track_functions = 'pl'")
        Pod.objects.filter(id__in=gone)._raw_delete(connection.alias)
        Pod.objects.filter(id__in=[]).delete()  # a deletion of nothing logs nothing
        if superuser:
            cursor.execute(
                "SELECT pg_stat_get_xact_function_calls('koordweb_rows_deleted'::regproc)"
            )
            assert cursor.fetchone()[0] == 1, "one call for the statement, not one per row"
            cursor.execute("SELECT pg_current_xact_id()::text::bigint")
            position = cursor.fetchone()[0]
    logged = _logged([p.id for p in pods])
    assert [(t, row_id) for t, row_id, _seq in logged] == [("koordweb_pod", i) for i in gone]
    assert all(seq > before for _t, _r, seq in logged), "logged after the pods' last writes"
    if superuser:  # PostgreSQL: the deleting transaction's id, as for every write
        assert {seq for _t, _r, seq in logged} == {position}
    assert Pod.objects.filter(id=pods[3].id).exists()
