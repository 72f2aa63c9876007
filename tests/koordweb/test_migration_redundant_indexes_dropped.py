"""Migration 0015 drops the single-column indexes that a composite index already leads with (a
job's cluster and quota, a decision's job), in place: the composite indexes stay, the job table
keeps the change-position triggers of migration 0008, and going back brings the indexes back.
Forward and back, on the test database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from tests.koordweb.schema import migrate_to, table_triggers

BEFORE = [("koordweb", "0014_pod_nominated_node_unindexed")]
DROPPED = (
    ("koordweb_job", "cluster_id"),
    ("koordweb_job", "quota_id"),
    ("koordweb_decision", "job_id"),
)


def _indexes(table: str) -> list[list[str]]:
    """The column lists of the table's plain (not unique, not primary) indexes."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return [c["columns"] for c in found.values() if c["index"] and not c["unique"]]


@pytest.mark.django_db(transaction=True)
def test_redundant_indexes_go_and_come_back_and_what_leads_them_stays(latest: Any) -> None:
    triggers = table_triggers("koordweb_job")
    assert triggers, "the change-position triggers of migration 0008 are there"
    for table, column in DROPPED:
        assert [column] not in _indexes(table), (table, column)
    assert ["cluster_id", "state"] in _indexes("koordweb_job")
    assert ["quota_id", "state"] in _indexes("koordweb_job")
    assert ["job_id", "created_at"] in _indexes("koordweb_decision")

    migrate_to(BEFORE)
    for table, column in DROPPED:
        assert [column] in _indexes(table), (table, column)
    assert table_triggers("koordweb_job") == triggers

    migrate_to(latest)
    for table, column in DROPPED:
        assert [column] not in _indexes(table), (table, column)
    assert ["cluster_id", "state"] in _indexes("koordweb_job")
    assert table_triggers("koordweb_job") == triggers
