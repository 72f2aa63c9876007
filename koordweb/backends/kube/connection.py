"""How the kubernetes backend reaches a cluster: client construction, bounded retries, a budget.

Every call goes through `RetryPolicy.call`: 5xx answers, 429 throttling and dropped connections
are retried with exponential backoff, everything else is raised at once. A Retry-After the server
sends (API Priority and Fairness 429s, Timeout 504s) is honoured as given: never retried sooner.
The urllib3 pool's own retries are switched off so that this is the one place that retries.
Every request, retries and watch openings included, first takes a token from the client's
`TokenBucket` (client-go's QPS/burst rate limiter, named as kube-scheduler's flags).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

log = logging.getLogger(__name__)
T = TypeVar("T")


class KubeUnavailable(Exception):
    """The API server kept failing after every retry."""


def api_client(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    in_cluster: bool = False,
    base_url: str | None = None,
    token: str | None = None,
    verify_ssl: bool = True,
    pool_maxsize: int = 64,
) -> client.ApiClient:
    """An ApiClient from a kubeconfig file, the pod's service account, or a bare URL."""
    configuration = client.Configuration()
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    elif kubeconfig:
        config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    elif base_url:
        configuration.host = base_url.rstrip("/")
        configuration.verify_ssl = verify_ssl
        if token:
            configuration.api_key = {"BearerToken": token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
    else:
        raise ValueError("give a kubeconfig path, in_cluster=True or a base_url")
    configuration.retries = False
    # One connection per watch stream plus one per binding in flight: urllib3 opens (and then
    # throws away) a connection beyond the pool's size, a TCP handshake per call.
    configuration.connection_pool_maxsize = max(pool_maxsize, 1)
    return client.ApiClient(configuration)


def status_body(error: ApiException) -> dict[str, Any]:
    """The Status object of an error answer ({} when the body is not one)."""
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def retry_after_seconds(error: ApiException) -> float | None:
    headers = error.headers or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    if value is None:
        value = (status_body(error).get("details") or {}).get("retryAfterSeconds")
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def is_transient(error: BaseException) -> bool:
    if isinstance(error, ApiException):
        return error.status in (429, 500, 502, 503, 504) or error.status == 0
    return isinstance(error, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError)


class TokenBucket:
    """Client-side rate limit: `qps` tokens a second, up to `burst` saved (client-go's
    token-bucket limiter). `take()` waits for a token; qps <= 0 means no limit."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps = float(qps)
        self.burst = max(int(burst), 1)
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._at = clock()
        self.waited = 0.0  # seconds callers spent waiting for tokens, for the metrics

    def take(self) -> None:
        if self.qps <= 0:
            return
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0  # reserved now; a debt is paid by waiting outside the lock
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
            self.waited += wait
        if wait > 0:
            self._sleep(wait)


@dataclass
class RetryPolicy:
    """Exponential backoff, bounded in attempts and in each delay; the clock is injectable.

    The server's Retry-After is not bounded by `max_delay`: retrying sooner than it asked is
    what overloads it (up to `max_hint`, against a nonsense value).
    """

    attempts: int = 6
    base_delay: float = 0.2
    max_delay: float = 10.0
    sleep: Callable[[float], None] = field(default=time.sleep)
    limiter: TokenBucket | None = None
    max_hint: float = 120.0

    def delay(self, attempt: int, error: BaseException | None = None) -> float:
        hinted = retry_after_seconds(error) if isinstance(error, ApiException) else None
        if hinted is not None and hinted > 0:
            return min(hinted, self.max_hint)
        return min(self.max_delay, self.base_delay * (2**attempt))

    def throttle(self) -> None:
        """Take a token of the client's budget before a request (no-op without a limiter)."""
        if self.limiter is not None:
            self.limiter.take()

    def call(self, what: str, action: Callable[[], T]) -> T:
        for attempt in range(self.attempts):
            try:
                self.throttle()
                return action()
            except Exception as error:
                if not is_transient(error):
                    raise
                if attempt == self.attempts - 1:
                    raise KubeUnavailable(
                        f"{what}: gave up after {self.attempts} attempts: {error}"
                    ) from error
                wait = self.delay(attempt, error)
                log.warning("%s failed (%s); retrying in %.2fs", what, _describe(error), wait)
                self.sleep(wait)
        raise AssertionError("unreachable")


def _describe(error: BaseException) -> str:
    if isinstance(error, ApiException):
        return f"{error.status} {status_body(error).get('reason', error.reason)}"
    return type(error).__name__
