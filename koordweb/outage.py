"""Answers for a lost database, cache or broker: 503 with Retry-After, never a 500.

Owns what the web process does while PostgreSQL or Redis is away: `OutageMiddleware` turns a
connection failure into `503 Service Unavailable` with `Retry-After` (JSON under /api/, a small
HTML page elsewhere), `outage_response` is the same answer for the API's exception handler (DRF
answers a view's exceptions itself, so they never reach a middleware), and `round_enqueue_guarded`
keeps a submission whose round request fails *after* its commit a success: the job is in the
database and the next timed round takes it.

Only connection failures are outages. Anything else is a bug and keeps its 500 and traceback.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from kombu.exceptions import OperationalError as BrokerOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework.response import Response

logger = logging.getLogger("koordweb.outage")

# What a lost PostgreSQL (or a locked-out SQLite), Redis cache or Celery broker raises.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    RedisConnectionError,
    RedisTimeoutError,
    BrokerOperationalError,
)
API_PREFIX = "/api/"
# Set on the request when Django turned an outage inside another middleware into a 500.
_SEEN = "_koordweb_outage"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>koordweb: temporarily unavailable</title></head>
<body><h1>Temporarily unavailable</h1>
<p>koordweb cannot reach its {what} right now. Nothing you submitted has been lost;
please try again in {seconds} seconds.</p></body></html>
"""


def is_outage(exc: BaseException | None) -> bool:
    """True when `exc` (or what it was explicitly raised from) is a lost database, cache or broker.

    Only `raise ... from` chains are followed: an unrelated bug hit while handling an outage is
    still a bug.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OUTAGE_ERRORS):
            return True
        seen.add(id(exc))
        exc = exc.__cause__
    return False


def _what(exc: BaseException) -> str:
    if isinstance(exc, OperationalError | InterfaceError):
        return "database"
    return "cache or message broker"


def retry_after_seconds() -> int:
    return int(settings.KOORDWEB_OUTAGE_RETRY_AFTER)


def _log(request: Any, exc: BaseException) -> None:
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    logger.warning(
        "503 for %s %s: %s unreachable (%s: %s)",
        getattr(request, "method", "?"),
        getattr(request, "path", ""),
        _what(exc),
        type(exc).__name__,
        first_line,
    )


def _api_body(exc: BaseException, seconds: int) -> dict[str, str]:
    return {
        "detail": f"Service temporarily unavailable: the {_what(exc)} cannot be reached. "
        f"Retry in {seconds} seconds (with the same Idempotency-Key for submissions).",
        "code": "service_unavailable",
    }


def outage_api_response(request: Any, exc: BaseException) -> Response:
    """The API's 503 as a DRF Response, for `koordweb.api.exceptions.api_exception_handler`."""
    seconds = retry_after_seconds()
    _log(request, exc)
    return Response(
        _api_body(exc, seconds),
        status=503,
        headers={"Retry-After": str(seconds), "Cache-Control": "no-store"},
    )


def outage_response(request: Any, exc: BaseException) -> HttpResponse:
    """The 503 for `request` (a Django or DRF request): JSON under /api/, HTML elsewhere."""
    seconds = retry_after_seconds()
    what = _what(exc)
    path = str(getattr(request, "path", "") or "")
    _log(request, exc)
    response: HttpResponse
    if path.startswith(API_PREFIX):
        response = JsonResponse(_api_body(exc, seconds), status=503)
    else:
        response = HttpResponse(
            PAGE.format(what=what, seconds=seconds),
            status=503,
            content_type="text/html; charset=utf-8",
        )
    response["Retry-After"] = str(seconds)
    # An error answer must not be cached by a proxy and replayed after recovery.
    response["Cache-Control"] = "no-store"
    return response


def _remember_outage(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """Django is about to answer 500 for an exception: note it when it is an outage."""
    exc = sys.exc_info()[1]
    if request is not None and is_outage(exc):
        setattr(request, _SEEN, exc)


got_request_exception.connect(_remember_outage, dispatch_uid="koordweb.outage")


class OutageMiddleware:
    """503 + Retry-After instead of a 500 when the database, cache or broker is unreachable.

    Place it right after SecurityMiddleware: every middleware inside it (sessions, auth, the API
    error counter, which all use the database or the cache) is then covered, and the 503 still
    gets the security headers. A view's exception arrives in `process_exception`; one raised by an
    inner middleware has already been turned into a 500 by Django, which reported it through
    `got_request_exception`, so that 500 is replaced here.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            response = self.get_response(request)
        except OUTAGE_ERRORS as exc:  # only when a handler above re-raises; kept for safety
            return outage_response(request, exc)
        seen = getattr(request, _SEEN, None)
        if response.status_code == 500 and seen is not None:
            return outage_response(request, seen)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if is_outage(exception):
            return outage_response(request, exception)
        return None


def round_enqueue_guarded(enqueue: Callable[[], None], *, cluster_id: int) -> Callable[[], None]:
    """`enqueue` for `transaction.on_commit`, made harmless when the broker or cache is down.

    It runs after the job's commit: raising there would answer an error for a job that exists
    (a client without an Idempotency-Key would then submit it twice). The job is pending in the
    database and the beat's next timed round schedules every pending job, so the request is
    only logged.
    """

    def guarded() -> None:
        try:
            enqueue()
        except OUTAGE_ERRORS as exc:
            logger.warning(
                "round request for cluster %s not enqueued (%s: %s); the next timed round "
                "takes the committed job",
                cluster_id,
                type(exc).__name__,
                exc,
            )

    return guarded
