"""What the test database's schema holds, for the migration tests: a table's triggers."""

from __future__ import annotations

from django.db import connection


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
