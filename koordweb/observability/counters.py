"""API error counters in the shared Django cache: every process (web, worker) adds to the same ones.

`api_error_count("http", 404)` for koordweb's own API (the middleware in `metrics`),
`api_error_count("kube", 503)` for answers of the Kubernetes API server (code 0: the connection
dropped). This module imports no models, so the kube wire layer may call it.
"""

from __future__ import annotations

from http import HTTPStatus

from django.core.cache import cache

API_ERROR_SOURCES = ("http", "kube")
# Every code a counter may exist for: 4xx and 5xx from the standard list, 0 = no answer at all.
API_ERROR_CODES = (0, *sorted(s.value for s in HTTPStatus if s.value >= 400))
_ERROR_KEY = "metrics:api-errors:{source}:{code}"


def api_error_count(source: str, code: int) -> None:
    """Add one error answer (or, with code 0, a dropped connection) to the shared counters."""
    if source not in API_ERROR_SOURCES:
        raise ValueError(f"unknown API error source {source!r}")
    if code not in API_ERROR_CODES:
        code = 500 if code >= 500 else 400 if code >= 400 else 0
    key = _ERROR_KEY.format(source=source, code=code)
    # add() makes the key exist forever; incr() is atomic on Redis (the production cache).
    cache.add(key, 0, timeout=None)
    try:
        cache.incr(key)
    except ValueError:  # evicted between add and incr
        cache.set(key, 1, timeout=None)


def api_error_counts() -> dict[tuple[str, int], int]:
    """{(source, code): count} for every counter that exists."""
    keys = {
        _ERROR_KEY.format(source=source, code=code): (source, code)
        for source in API_ERROR_SOURCES
        for code in API_ERROR_CODES
    }
    found = cache.get_many(list(keys))
    return {keys[key]: int(value) for key, value in found.items()}
