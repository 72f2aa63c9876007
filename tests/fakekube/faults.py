"""Fault injection and the request log.

A fault matches requests by method and a path regex and fires for its next `count` matches:
`status` answers that code before the request is processed, `drop` closes the connection before
processing, `drop_after` processes the request and then closes the connection without answering
(the nastiest case for idempotency). `latency` delays every matching request. `apf` makes a 429
the one API Priority and Fairness sends: a plain-text body, `Retry-After: retry_after` and the
flow schema / priority level headers. The log keeps when each request arrived (`at`), so a test
can check a client waited as long as it was told to.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Fault:
    path: str = ".*"  # a regex searched in the request path
    method: str | None = None  # None matches every method
    count: int = 1
    status: int | None = None  # answer this code (5xx, 429)
    drop: bool = False  # close the connection before processing
    drop_after: bool = False  # process, then close without answering
    latency: float = 0.0  # seconds to wait before handling
    apf: bool = False  # a 429 as API Priority and Fairness rejects a request
    retry_after: int = 1  # its Retry-After (APF sends 1 to 32 seconds)
    fired: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method.upper() == method) and bool(
            re.search(self.path, path)
        )


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    query: str
    content_type: str
    body: Any
    status: int | None  # None when the connection was dropped
    delay: float = 0.0  # seconds of injected latency waited before handling
    at: float = field(default_factory=time.monotonic)  # when it arrived
    retry_after: int | None = None  # the Retry-After it was answered with
    done: float = field(default_factory=time.monotonic)  # when it was answered (logged)


@dataclass
class FaultPlan:
    """The faults armed on a server, and every request it received."""

    faults: list[Fault] = field(default_factory=list)
    requests: list[LoggedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **spec: Any) -> Fault:
        fault = Fault(**spec)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def take(self, method: str, path: str) -> tuple[float, Fault | None]:
        """(latency to apply, the failure fault that fires now, if any)."""
        delay, failure = 0.0, None
        with self._lock:
            for fault in self.faults:
                if fault.count <= 0 or not fault.matches(method, path):
                    continue
                if fault.latency and not (fault.status or fault.drop or fault.drop_after):
                    delay += fault.latency
                    continue
                if failure is None:
                    fault.count -= 1
                    fault.fired += 1
                    delay += fault.latency
                    failure = fault
            self.faults = [f for f in self.faults if f.count > 0]
        return delay, failure

    def log(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.requests.append(entry)

    def requests_to(self, path_regex: str, method: str | None = None) -> list[LoggedRequest]:
        with self._lock:
            return [
                r
                for r in self.requests
                if re.search(path_regex, r.path) and (method is None or r.method == method)
            ]

    def as_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "faults": [asdict(f) for f in self.faults],
                "requests": [asdict(r) for r in self.requests],
            }
