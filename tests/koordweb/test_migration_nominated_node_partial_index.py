"""Migration 0016 indexes a pod's nominated node where it is set: a node's deletion finds its
nominated pods by the index instead of reading the whole pod table, and a bound pod (its
nomination cleared) has no entry. A plain CREATE INDEX: the pod table keeps the change-position
triggers of migration 0008. Forward and back, on the test database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from tests.koordweb.schema import index_definition, migrate_to, table_triggers

BEFORE = [("koordweb", "0015_job_decision_redundant_indexes")]
INDEX = "pod_nominated_node_set"


def _index_columns() -> list[str] | None:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, "koordweb_pod").get(INDEX)
    return list(found["columns"]) if found else None


def _partial() -> bool:
    """Whether the database stored the index with its condition (a WHERE in its definition)."""
    definition = index_definition(INDEX)
    return bool(definition) and "WHERE" in str(definition).upper()


@pytest.mark.django_db(transaction=True)
def test_nominated_node_index_comes_partial_and_goes_back(latest: Any) -> None:
    triggers = table_triggers("koordweb_pod")
    assert triggers, "the change-position triggers of migration 0008 are there"
    assert _index_columns() == ["nominated_node_id"]
    assert _partial()

    migrate_to(BEFORE)
    assert _index_columns() is None
    assert table_triggers("koordweb_pod") == triggers

    migrate_to(latest)
    assert _index_columns() == ["nominated_node_id"] and _partial()
    assert table_triggers("koordweb_pod") == triggers
