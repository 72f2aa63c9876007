"""An in-memory mirror of a cluster: per kind, list then watch from the list's resourceVersion.

Each kind has a `Reflector` thread, which behaves as client-go's reflector does:
- it lists (in pages, a consistent read), then watches from the list's resourceVersion with
  BOOKMARKs, whose versions it keeps, so a re-watch starts where the stream really was;
- a watch ending is expected (the server ends it after its timeoutSeconds, jittered as client-go
  does, or the client's read timeout cuts a silent one): it re-watches from the last version;
- `410 Expired` (at the start or mid-stream) and a `ResourceVersionTooLarge` 504 (the server's
  store is older than the version asked for, as after an etcd restore) relist from scratch: a
  version the server cannot serve is never asked for again;
- other failures back off and retry for as long as the mirror runs, never sooner than the
  server's Retry-After (API Priority and Fairness 429s).

Absence is not deletion. An object is known gone from a DELETED event, or from a list that started
after the caller knew it and did not hold it (`Reflector.gone`): a stale watch (late events, a
second worker's writes not yet seen) must never read as "gone". `ClusterMirror.documents(kind)`
answers a kind's objects as they stand: each kind is current on its own (no cross-kind snapshot
exists in Kubernetes either).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

from koordweb.backends.kube.connection import RetryPolicy, is_transient, status_body
from koordweb.backends.kube.kinds import WatchedKind, object_key

log = logging.getLogger(__name__)
Doc = dict[str, Any]
PAGE_SIZE = 500
TOO_LARGE = "ResourceVersionTooLarge"
TOMBSTONES = 200_000  # UIDs seen deleted, kept for `gone` (the oldest forgotten first)
READ_MARGIN = 30.0  # seconds past a watch's timeoutSeconds before the client gives up reading


def is_expired(error: ApiException) -> bool:
    """410: the version left the server's window (compaction; a restarted watch cache)."""
    return error.status == 410


def is_too_large(error: ApiException) -> bool:
    """The server's store is behind the version asked for (client-go's
    isTooLargeResourceVersionError): the cause, or an old server's Timeout message."""
    body = status_body(error)
    causes = (body.get("details") or {}).get("causes") or []
    if any(c.get("reason") == TOO_LARGE for c in causes if isinstance(c, dict)):
        return True
    if error.status != 504 and body.get("reason") != "Timeout":
        return False
    text = f"{body.get('message', '')} {error.reason or ''}"
    return "Too large resource version" in text


def _stream_error(status: Doc) -> ApiException:
    """A watch's ERROR event as the ApiException its HTTP answer would have been."""
    code = int(status.get("code") or 500)
    error = ApiException(status=code, reason=f"{status.get('reason')}: {status.get('message')}")
    error.body = json.dumps(status)
    return error


class Reflector:
    """Keeps one kind's objects current in `self.objects`, keyed by (namespace, name)."""

    def __init__(
        self,
        kind: WatchedKind,
        api_client: client.ApiClient,
        retry: RetryPolicy,
        watch_timeout: int,
    ) -> None:
        self.kind = kind
        self.list_fn, self.list_args = kind.list_call(api_client)
        self.retry = retry
        self.watch_timeout = watch_timeout
        self.objects: dict[tuple[str, str], Doc] = {}
        self.resource_version: str | None = None
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.stopped = threading.Event()
        self.relists = 0  # full lists made (1 + one per 410 or too-large version)
        self.watches = 0  # watch requests opened
        self.last_error: BaseException | None = None
        self._response: Any = None  # the open watch stream
        self._uids: dict[str, tuple[str, str]] = {}  # uid -> key, for the objects held
        self._tombstones: dict[str, None] = {}  # UIDs known deleted, oldest first
        self._proof: tuple[float, frozenset[str]] | None = None  # the last list: start, UIDs

    def _doc(self, raw: Doc) -> Doc:
        # Built-in lists leave kind/apiVersion off their items; a manifest always has them.
        raw["apiVersion"], raw["kind"] = self.kind.api_version, self.kind.kind
        return raw

    def _list_all(self) -> tuple[dict[tuple[str, str], Doc], str]:
        """Every object, page by page, as one consistent read (a 410 on a continue token,
        the pages having outlived the server's window, starts the list again)."""
        objects: dict[tuple[str, str], Doc] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": PAGE_SIZE, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            self.retry.throttle()
            try:
                page = json.loads(self.list_fn(*self.list_args, **kwargs).data)
            except ApiException as error:
                if token and is_expired(error):
                    objects, token = {}, None
                    continue
                raise
            for item in page.get("items") or []:
                objects[object_key(item)] = self._doc(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return objects, page["metadata"]["resourceVersion"]

    def relist(self) -> None:
        started = time.monotonic()
        objects, version = self._list_all()
        uids = {_uid(doc): key for key, doc in objects.items() if _uid(doc)}
        with self.lock:
            for uid in self._uids.keys() - uids.keys():
                self._bury(uid)  # held before, absent from a fresh list: gone
            self.objects, self._uids = objects, uids
            self.resource_version = version
            self._proof = (started, frozenset(uids))
            self.relists += 1
        self.synced.set()

    def prove_absence(self) -> None:
        """A fresh list read for its UIDs only (the mirror's own state stays the watch's): what
        it does not hold was gone when it started."""
        started = time.monotonic()
        objects, _ = self._list_all()
        uids = frozenset(u for u in (_uid(doc) for doc in objects.values()) if u)
        with self.lock:
            if self._proof is None or self._proof[0] < started:
                self._proof = (started, uids)

    def gone(self, uid: str, known_since: float) -> bool:
        """Whether the object of `uid`, which the caller knew to exist at `known_since`
        (time.monotonic), is known deleted: a DELETED event, or a list started after then
        without it. An object merely absent from the mirror is not."""
        with self.lock:
            if uid in self._tombstones:
                return True
            proof = self._proof
        return proof is not None and proof[0] >= known_since and uid not in proof[1]

    def uids(self) -> set[str]:
        with self.lock:
            return set(self._uids)

    def watch_once(self) -> None:
        """Stream events from the current resourceVersion until the server ends the watch."""
        timeout = int(self.watch_timeout * (1 + random.random()))  # client-go's jitter
        self.retry.throttle()
        response = self._open_watch(
            *self.list_args,
            watch=True,
            resource_version=self.resource_version,
            timeout_seconds=timeout,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=(10.0, timeout + READ_MARGIN),
        )
        ended = False
        try:
            for event in _events(response):
                if event.get("type") == "ERROR":
                    raise _stream_error(event.get("object") or {})
                self.apply(event.get("type", ""), event.get("object") or {})
            ended = True
        finally:
            with self.lock:
                self._response = None
            # A stream read to its end goes back to the pool; one cut short cannot be reused.
            with contextlib.suppress(Exception):
                if ended:
                    response.release_conn()
                else:
                    response.close()

    def _open_watch(self, *args: Any, **kwargs: Any) -> Any:
        # Remember the open stream under the lock so that stop() can always cut it, even when
        # it races with the request being made.
        response = self.list_fn(*args, **kwargs)
        with self.lock:
            self._response = response
            self.watches += 1
            if self.stopped.is_set():
                _shut(response)
        return response

    def apply(self, kind: str, raw: Doc) -> None:
        version = (raw.get("metadata") or {}).get("resourceVersion")
        with self.lock:
            if kind in ("ADDED", "MODIFIED"):
                key = object_key(raw)
                previous = self.objects.get(key)
                if previous is not None and _uid(previous) != _uid(raw):
                    self._uids.pop(_uid(previous), None)
                self.objects[key] = self._doc(raw)
                if _uid(raw):
                    self._uids[_uid(raw)] = key
            elif kind == "DELETED":
                self.objects.pop(object_key(raw), None)
                if _uid(raw):
                    self._uids.pop(_uid(raw), None)
                    self._bury(_uid(raw))
            # BOOKMARK: only its version, which is what it is for.
            if version:
                self.resource_version = version

    def _bury(self, uid: str) -> None:
        self._tombstones[uid] = None
        while len(self._tombstones) > TOMBSTONES:
            del self._tombstones[next(iter(self._tombstones))]

    def run(self) -> None:
        failures = 0
        while not self.stopped.is_set():
            try:
                if self.resource_version is None:
                    self.relist()
                self.watch_once()
                failures = 0
            except ApiException as error:
                if self.stopped.is_set():
                    return
                if is_expired(error) or is_too_large(error):
                    self._forget_version(error)
                    if is_expired(error):
                        continue
                failures = self._back_off(error, failures)
            except Exception as error:
                if self.stopped.is_set():
                    return
                failures = self._back_off(error, failures)

    def _forget_version(self, error: ApiException) -> None:
        """The server cannot serve our version: relist (a consistent read), never ask again."""
        why = "expired" if is_expired(error) else "is ahead of the server (restored?)"
        log.warning(
            "%s: resourceVersion %s %s, relisting: %s",
            self.kind.name,
            self.resource_version,
            why,
            status_body(error).get("message") or error.reason,
        )
        self.resource_version = None

    def _back_off(self, error: BaseException, failures: int) -> int:
        self.last_error = error
        wait = self.retry.delay(min(failures, 8), error)
        if is_transient(error):
            log.info("%s: %s; retrying in %.2fs", self.kind.name, _describe(error), wait)
        else:
            log.error("%s: %s", self.kind.name, error)
        self.stopped.wait(wait)
        return failures + 1

    def stop(self) -> None:
        with self.lock:
            self.stopped.set()
            if self._response is not None:
                _shut(self._response)

    def snapshot(self, copied: bool = False) -> list[Doc]:
        """The objects in key order. They are shared with the mirror unless `copied`: entries
        are only ever replaced, never changed in place, so readers must not change them either
        (a deep copy of 20,000 pods costs seconds)."""
        with self.lock:
            objects = [self.objects[key] for key in sorted(self.objects)]
        return [copy.deepcopy(o) for o in objects] if copied else objects

    def find(self, namespace: str, name: str) -> Doc | None:
        """One object as the mirror holds it (shared: do not change it), None when absent."""
        with self.lock:
            return self.objects.get((namespace, name))


class ClusterMirror:
    """The reflectors of every watched kind, started on first use."""

    def __init__(
        self,
        api_client: client.ApiClient,
        kinds: Iterable[WatchedKind],
        retry: RetryPolicy,
        watch_timeout: int = 300,
    ) -> None:
        self.reflectors = {
            kind.name: Reflector(kind, api_client, retry, watch_timeout) for kind in kinds
        }
        self._threads: list[threading.Thread] = []
        self._start_lock = threading.Lock()

    def start(self) -> None:
        with self._start_lock:
            if self._threads:
                return
            for name, reflector in self.reflectors.items():
                thread = threading.Thread(
                    target=reflector.run, name=f"kube-reflector-{name}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def wait_synced(self, timeout: float) -> list[str]:
        """Kinds still not listed once after `timeout` seconds (empty when all are)."""
        deadline = time.monotonic() + timeout
        for reflector in self.reflectors.values():
            reflector.synced.wait(max(0.0, deadline - time.monotonic()))
        return [name for name, r in self.reflectors.items() if not r.synced.is_set()]

    def documents(self, name: str, copied: bool = False) -> list[Doc]:
        return self.reflectors[name].snapshot(copied)

    def stop(self) -> None:
        for reflector in self.reflectors.values():
            reflector.stop()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()


def _events(response: Any) -> Iterator[Doc]:
    """A watch answer's events, one JSON object a line (decoded once, no model built)."""
    for line in iter_resp_lines(response):
        if line.strip():
            yield json.loads(line)


def _uid(doc: Doc) -> str:
    return str((doc.get("metadata") or {}).get("uid") or "")


def _describe(error: BaseException) -> str:
    if isinstance(error, ApiException):
        return f"{error.status} {status_body(error).get('reason', error.reason)}"
    return type(error).__name__


def _shut(response: Any) -> None:
    """Cut a streaming response's socket, unblocking the thread reading it."""
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
