"""Observability: JSON logs carrying the round id (`logs`), Prometheus metrics (`metrics`).

Only the logging names are re-exported here: settings' LOGGING imports this package before the
app registry is ready, and `metrics` needs the models.
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
