"""One round per cluster at a time.

PostgreSQL: a transaction-level advisory lock, released on commit, rollback or when a dead worker's
connection drops. SQLite: rounds run in `BEGIN IMMEDIATE` transactions (settings), so the database's
single writer lock already serialises them; the function then always answers True.
"""

from __future__ import annotations

from django.db import connection

ROUND_LOCK_CLASS = 0x6B77  # "kw": the advisory-lock key space of koordweb rounds


def round_lock_try(*, cluster_id: int) -> bool:
    """Take the round lock of a cluster for the current transaction; False if another holds it."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [ROUND_LOCK_CLASS, cluster_id])
        row = cursor.fetchone()
    return bool(row and row[0])
