"""Migration 0011: a preemption's rule, recorded as an English prefix of its reason, becomes
`cost["rule"]` and `cost["preemptor_priority"]`; the reverse puts the prefix back. Run forward
and back on the test database (SQLite or PostgreSQL) with a row of each kind."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import import_module
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("koordweb", "0010_pod_intent_fewer_indexes")]
AFTER = [("koordweb", "0011_preemption_rule_data")]
WHY = "Insufficient quotas, quotaName: team-a, exceedDimensions: [nvidia.com/gpu]"
COST = {"victim_jobs": 1, "highest_victim_priority": 5000}

# (old reason, old cost) -> (reason, cost) after the migration
ROWS: list[tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]] = [
    (
        (f"lower-priority jobs evicted (priority 9000 over at most 5000): {WHY}", COST),
        (WHY, {**COST, "rule": "LowerPriority", "preemptor_priority": 9000}),
    ),
    (
        (
            "lower-priority jobs evicted (priority 9000 over at most 5000, of the same quota, to "
            f"free quota): {WHY}; blocked: a PodDisruptionBudget allows no disruption",
            COST,
        ),
        (
            f"{WHY}; blocked: a PodDisruptionBudget allows no disruption",
            {**COST, "rule": "InQuota", "preemptor_priority": 9000},
        ),
    ),
    (
        # the reclaim prefix names no priority: the preemptor job's (7000 below) is recorded
        (
            f"borrowed quota reclaimed (the preemptor's quota is within its min): {WHY}",
            {"highest_victim_priority": 9500},
        ),
        (
            WHY,
            {"highest_victim_priority": 9500, "rule": "QuotaReclaim", "preemptor_priority": 7000},
        ),
    ),
    # recorded before the rule was named: left as it is, both ways
    (("higher priority job needs the block", COST), ("higher priority job needs the block", COST)),
    (("", {}), ("", {})),
]


def _migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate the test database to `targets`; the apps (historical models) there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def at_0010(transactional_db: None) -> Iterator[Any]:
    apps = _migrate(BEFORE)
    yield apps
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    _migrate(executor.loader.graph.leaf_nodes("koordweb"))


def _rows(apps: Any) -> list[int]:
    Cluster = apps.get_model("koordweb", "Cluster")
    Job = apps.get_model("koordweb", "Job")
    Preemption = apps.get_model("koordweb", "Preemption")
    at = datetime(2026, 12, 1, tzinfo=UTC)
    cluster = Cluster.objects.create(name="old")
    job = Job.objects.create(cluster=cluster, name="urgent", priority=7000, submitted_at=at)
    return [
        Preemption.objects.create(
            cluster=cluster, preemptor=job, reason=reason, cost=cost, created_at=at
        ).pk
        for (reason, cost), _ in ROWS
    ]


def _read(apps: Any, ids: list[int]) -> list[tuple[str, dict[str, Any]]]:
    found = apps.get_model("koordweb", "Preemption").objects.in_bulk(ids)
    return [(found[pk].reason, found[pk].cost) for pk in ids]


@pytest.mark.django_db(transaction=True)
def test_migration_turns_the_rule_prefix_into_data_and_back(at_0010: Any) -> None:
    ids = _rows(at_0010)
    after = _migrate(AFTER)
    assert _read(after, ids) == [new for _, new in ROWS]
    before = _migrate(BEFORE)
    assert _read(before, ids) == [old for old, _ in ROWS]


def test_the_short_lived_in_quota_wording_and_an_unknown_highest_are_read_too() -> None:
    parse = import_module("koordweb.migrations.0011_preemption_rule_data").parse_prefix
    old = (
        "lower-priority jobs of the same quota evicted to free quota (priority 9 over at most 5): "
    )
    assert parse(old + WHY) == ("InQuota", 9, 5, WHY)
    assert parse(f"lower-priority jobs evicted (priority -1 over at most None): {WHY}") == (
        "LowerPriority",
        -1,
        None,
        WHY,
    )
    assert parse(f"lower-priority jobs evicted: {WHY}") is None
