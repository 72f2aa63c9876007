"""Durations as Go's `time.ParseDuration` reads them: Kubernetes and Koordinator write and read
`600s`, `10m`, `1h30m`, `1.5h`, `500ms`, `-10s` or a bare `0`.

A duration is an optional sign and one or more decimal numbers, each with an optional fraction
and a unit: `ns`, `us` (or `µs`/`μs`), `ms`, `s`, `m`, `h`. A number without a unit is an error,
except `0` alone. Go also refuses a value beyond what an int64 of nanoseconds holds (about 292
years), and so does this.
"""

from __future__ import annotations

import math
import re

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign
    "μs": 1e-6,  # U+03BC Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_MAX_SECONDS = (2**63 - 1) / 1e9
_MAX_TEXT = 64  # longer texts are not durations anyone writes; refused before any matching


def go_duration_seconds(text: str) -> float | None:
    """The duration `text` in seconds (negative when it says so); None when Go would refuse it."""
    if not isinstance(text, str) or not text or len(text) > _MAX_TEXT:
        return None
    sign = -1.0 if text[0] == "-" else 1.0
    body = text[1:] if text[0] in "+-" else text
    if body == "0":
        return 0.0
    if not body:
        return None
    total, position = 0.0, 0
    while position < len(body):
        part = _PART.match(body, position)
        if part is None:
            return None
        total += float(part[1]) * _UNIT_SECONDS[part[2]]
        position = part.end()
    if total > _MAX_SECONDS:
        return None
    return sign * total


def duration_seconds(text: str) -> int | None:
    """A Kubernetes (Go) duration in whole seconds, a fraction rounded up (`500ms` is 1); None
    when Go would refuse it or it is negative."""
    seconds = go_duration_seconds(text.strip())
    if seconds is None or seconds < 0:
        return None
    return math.ceil(seconds)
