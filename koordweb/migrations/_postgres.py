"""Shared by migrations whose SQL is PostgreSQL's own (triggers, column defaults): a RunPython
step that runs its statements there and nothing on SQLite. Not a migration (the loader skips
modules named with a leading underscore)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def on_postgresql(statements: Sequence[str]) -> Callable[[Any, Any], None]:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        for sql in statements:
            schema_editor.execute(sql, params=None)

    return run
