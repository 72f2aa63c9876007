"""The migration tests' helpers: moving the test database between migrations, and what its
schema holds (a table's triggers, an index's definition)."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def table_triggers(table: str) -> set[str]:
    """The names of the triggers a table carries (the change-position ones of migration 0008)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                [table],
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [table]
            )
        return {row[0] for row in cursor.fetchall()}


def index_definition(name: str) -> str | None:
    """The CREATE INDEX statement the database keeps for index `name` (None: no such index)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        else:
            cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [name])
        row = cursor.fetchone()
    return row[0] if row else None


def trigger_definition(table: str, name: str) -> str:
    """The CREATE TRIGGER statement PostgreSQL keeps for trigger `name` on `table`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = %s::regclass "
            "AND tgname = %s",
            [table, name],
        )
        return str(cursor.fetchone()[0])


def migrate_to(targets: list[tuple[str, str]]) -> None:
    """The test database at `targets` (app, migration name), forward or back."""
    MigrationExecutor(connection).migrate(targets)


def latest_migrations() -> list[tuple[str, str]]:
    """The newest migration of koordweb."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes("koordweb")
