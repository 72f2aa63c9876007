"""One round per cluster at a time, held for the whole round: plan, commit, enact.

The lock outlives the round's transactions, since enacting comes after the plan commits and must
finish before the next round of the cluster plans. It is released however the holder ends:
PostgreSQL: a session-level advisory lock (`pg_try_advisory_lock`), dropped with the connection of
a dead worker. SQLite (one machine by nature): an exclusive `flock` on a file beside the database,
dropped by the kernel when the process dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db import connection

ROUND_LOCK_CLASS = 0x6B77  # "kw": the advisory-lock key space of koordweb rounds


@contextlib.contextmanager
def round_lock(*, cluster_id: int) -> Iterator[bool]:
    """Hold the cluster's round lock for the block; yields False (and holds nothing) if taken."""
    if connection.vendor == "postgresql":
        with _advisory(cluster_id) as held:
            yield held
    else:
        with _file_lock(cluster_id) as held:
            yield held


@contextlib.contextmanager
def _advisory(cluster_id: int) -> Iterator[bool]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [ROUND_LOCK_CLASS, cluster_id])
        row = cursor.fetchone()
    held = bool(row and row[0])
    try:
        yield held
    finally:
        if held and connection.connection is not None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [ROUND_LOCK_CLASS, cluster_id])


@contextlib.contextmanager
def _file_lock(cluster_id: int) -> Iterator[bool]:
    # One lock file per database and cluster: test databases and checkouts never share one.
    database = str(connection.settings_dict.get("NAME") or "")
    digest = hashlib.sha1(database.encode()).hexdigest()[:12]
    folder = Path(settings.VAR_DIR) / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"round-{digest}-{cluster_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
