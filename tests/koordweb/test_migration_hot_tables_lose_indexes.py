"""Migrations 0013 and 0014 take indexes and constraints off hot tables without losing what else
is there: the intent table loses its foreign-key constraints and single-column indexes, the pod
table its nominated-node index, and the pod table keeps the change-position triggers of migration
0008 (SQLite would drop them if the table were rebuilt). Forward and back, on the test database.
Migration 0016 brings a partial nominated-node index back
(tests/koordweb/test_migration_nominated_node_partial_index.py): it is not the index 0014 drops."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from tests.koordweb.schema import migrate_to, table_triggers

BEFORE = [("koordweb", "0012_model_names")]
PARTIAL = "pod_nominated_node_set"  # migration 0016


def _constraints(table: str) -> dict[str, Any]:
    with connection.cursor() as cursor:
        return connection.introspection.get_constraints(cursor, table)


def _single_indexes(table: str, column: str) -> list[str]:
    return [
        name
        for name, c in _constraints(table).items()
        if c["index"]
        and not c["unique"]
        and not c["primary_key"]
        and c["columns"] == [column]
        and name != PARTIAL
    ]


def _foreign_keys(table: str) -> set[str]:
    return {c["columns"][0] for c in _constraints(table).values() if c["foreign_key"]}


@pytest.mark.django_db(transaction=True)
def test_indexes_and_constraints_go_and_come_back_and_triggers_stay(latest: Any) -> None:
    triggers = table_triggers("koordweb_pod")
    assert triggers, "the change-position triggers of migration 0008 are there"
    assert not _single_indexes("koordweb_pod", "nominated_node_id")
    assert not _foreign_keys("koordweb_intent")
    assert not _single_indexes("koordweb_intent", "pod_id")
    assert not _single_indexes("koordweb_intent", "round_id")

    migrate_to(BEFORE)
    assert _single_indexes("koordweb_pod", "nominated_node_id")
    assert {"cluster_id", "pod_id", "round_id"} <= _foreign_keys("koordweb_intent")
    assert table_triggers("koordweb_pod") == triggers

    migrate_to(latest)
    assert not _single_indexes("koordweb_pod", "nominated_node_id")
    assert not _foreign_keys("koordweb_intent")
    assert table_triggers("koordweb_pod") == triggers
