"""Observability: JSON logs carrying the round id (`logs`) and the shared error counters
(`counters`); the Prometheus view that reads them is `koordweb.prometheus`.

Only the logging names are re-exported here: settings' LOGGING imports this package before the
app registry is ready, and `counters` needs the cache.
"""

from koordweb.observability.logs import (
    JsonFormatter,
    RoundContextFilter,
    round_context,
    round_id_current,
    round_id_set,
)

__all__ = [
    "JsonFormatter",
    "RoundContextFilter",
    "round_context",
    "round_id_current",
    "round_id_set",
]
