"""Migration 0017 (PostgreSQL): a new row takes its change position from the column's default,
and an update calls the trigger only when its writer did not set the position to the writing
transaction's id; going back restores migration 0008's trigger on every insert and update.
SQLite keeps its own triggers both ways. Forward and back, on the test database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from tests.koordweb.schema import migrate_to, table_triggers, trigger_definition

BEFORE = [("koordweb", "0016_pod_nominated_node_partial_index")]
TABLES = ("koordweb_node", "koordweb_pod", "koordweb_job", "koordweb_nodemetric", "koordweb_device")


def _default(table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_default FROM information_schema.columns "
            "WHERE table_name = %s AND column_name = 'change_seq'",
            [table],
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_change_position_trigger_narrows_and_comes_back(latest: Any) -> None:
    triggers = {table: table_triggers(table) for table in TABLES}
    assert all(triggers.values()), "the change-position triggers of migration 0008 are there"
    if connection.vendor == "postgresql":
        for table in TABLES:
            definition = trigger_definition(table, f"{table}_change")
            assert "BEFORE UPDATE" in definition and "INSERT" not in definition
            assert "WHEN ((new.change_seq < ((pg_current_xact_id())::text)::bigint))" in definition
            assert "pg_current_xact_id()" in _default(table)

    migrate_to(BEFORE)
    assert {table: table_triggers(table) for table in TABLES} == triggers
    if connection.vendor == "postgresql":
        for table in TABLES:
            definition = trigger_definition(table, f"{table}_change")
            assert "BEFORE INSERT OR UPDATE" in definition and "WHEN" not in definition
            assert _default(table) == "0"

    migrate_to(latest)
    assert {table: table_triggers(table) for table in TABLES} == triggers
    if connection.vendor == "postgresql":
        assert "WHEN" in trigger_definition("koordweb_pod", "koordweb_pod_change")
