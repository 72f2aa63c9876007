"""A private in-memory database standing in for the configured one, for work that keeps nothing.

`manage.py simulate` imports a YAML dump and runs real rounds on it through the ORM. Inside
`scratch_database()` the `default` connection is a fresh in-memory SQLite database whose tables
are created from the models, so the simulation needs no migrated database, never takes the real
database's locks and cannot leave anything in it. The configured connection is put back on exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.utils import load_backend

SQLITE = "django.db.backends.sqlite3"


@contextmanager
def scratch_database() -> Iterator[None]:
    """Swap `default` for an in-memory SQLite database with every model's table, then restore."""
    alias = DEFAULT_DB_ALIAS
    configured: dict[str, Any] = connections.settings[alias]
    previous = connections[alias]
    settings_dict = {
        **configured,
        "ENGINE": SQLITE,
        "NAME": ":memory:",
        "OPTIONS": {},
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": False,
        "ATOMIC_REQUESTS": False,
        "AUTOCOMMIT": True,
    }
    scratch = load_backend(SQLITE).DatabaseWrapper(settings_dict, alias)
    connections.settings[alias] = settings_dict
    connections[alias] = scratch
    try:
        with scratch.schema_editor() as editor:
            for model in apps.get_models():
                if model._meta.managed and not model._meta.proxy:
                    editor.create_model(model)
        yield
    finally:
        scratch.close()
        connections.settings[alias] = configured
        connections[alias] = previous
