"""Structured logs: one JSON object per line, each line of a round carrying its id and cluster.

`round_context(cluster=...)` opens a round's logging context (a contextvar, so threads and
concurrent tasks keep their own), `round_id_set` names the round once its row exists;
`RoundContextFilter` copies both onto every record and `JsonFormatter` writes them. This module
imports no models: settings' LOGGING loads it before the app registry is ready.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

_round_id: ContextVar[int | None] = ContextVar("koordweb_round_id", default=None)
_cluster: ContextVar[str | None] = ContextVar("koordweb_cluster", default=None)


@contextlib.contextmanager
def round_context(*, cluster: str | None = None, round_id: int | None = None) -> Iterator[None]:
    """Every log line written inside carries this cluster and round id (restored on exit)."""
    cluster_token = _cluster.set(cluster)
    round_token = _round_id.set(round_id)
    try:
        yield
    finally:
        _round_id.reset(round_token)
        _cluster.reset(cluster_token)


def round_id_set(round_id: int | None) -> None:
    """Name the round once its row exists (inside `round_context`, which restores the old id)."""
    _round_id.set(round_id)


def round_id_current() -> int | None:
    return _round_id.get()


class RoundContextFilter(logging.Filter):
    """Copies the current round id and cluster onto each record (None outside a round)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.round_id = _round_id.get()
        record.cluster = _cluster.get()
        return True


# Attributes every LogRecord has; anything else on a record came from `extra=` and is kept.
_STANDARD_ATTRS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, round id, cluster, extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            # Read the contextvar too, so the formatter works without the filter installed.
            "round_id": getattr(record, "round_id", None) or _round_id.get(),
            "cluster": getattr(record, "cluster", None) or _cluster.get(),
            "process": record.process,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)
