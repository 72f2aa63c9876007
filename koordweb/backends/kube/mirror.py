"""An in-memory mirror of a cluster: per kind, list then watch from the list's resourceVersion.

Each kind has a `Reflector` thread (the informer pattern): it lists (in pages), then watches from
the list's resourceVersion with bookmarks, re-watches from the last version seen when a watch ends,
and relists from scratch when the server answers 410 Gone. Transient failures back off and retry
for as long as the mirror runs. `ClusterMirror.documents(kind)` answers a kind's objects as they
stand: each kind is current on its own (no cross-kind snapshot exists in Kubernetes either).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from koordweb.backends.kube.connection import RetryPolicy, is_transient
from koordweb.backends.kube.kinds import WatchedKind, object_key

log = logging.getLogger(__name__)
Doc = dict[str, Any]
PAGE_SIZE = 500


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
        self.relists = 0  # how many times a full list was needed (1 + one per 410)
        self.last_error: BaseException | None = None
        self._response: Any = None  # the open watch stream

    def _doc(self, raw: Doc) -> Doc:
        # Built-in lists leave kind/apiVersion off their items; a manifest always has them.
        raw["apiVersion"], raw["kind"] = self.kind.api_version, self.kind.kind
        return raw

    def relist(self) -> None:
        objects: dict[tuple[str, str], Doc] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": PAGE_SIZE, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            page = json.loads(self.list_fn(*self.list_args, **kwargs).data)
            for item in page.get("items") or []:
                objects[object_key(item)] = self._doc(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
        with self.lock:
            self.objects = objects
            self.resource_version = page["metadata"]["resourceVersion"]
            self.relists += 1
        self.synced.set()

    def watch_once(self) -> None:
        """Stream events from the current resourceVersion until the server ends the watch."""
        stream = watch.Watch(return_type="object").stream(
            self._open_watch,
            *self.list_args,
            resource_version=self.resource_version,
            timeout_seconds=self.watch_timeout,
            allow_watch_bookmarks=True,
        )
        for event in stream:
            self.apply(event["type"], event["raw_object"])

    def _open_watch(self, *args: Any, **kwargs: Any) -> Any:
        # Remember the open stream under the lock so that stop() can always cut it, even when
        # it races with the request being made.
        response = self.list_fn(*args, **kwargs)
        with self.lock:
            self._response = response
            if self.stopped.is_set():
                _shut(response)
        return response

    def apply(self, kind: str, raw: Doc) -> None:
        version = (raw.get("metadata") or {}).get("resourceVersion")
        with self.lock:
            if kind in ("ADDED", "MODIFIED"):
                self.objects[object_key(raw)] = self._doc(raw)
            elif kind == "DELETED":
                self.objects.pop(object_key(raw), None)
            if version:
                self.resource_version = version

    def run(self) -> None:
        failures = 0
        while not self.stopped.is_set():
            try:
                if self.resource_version is None:
                    self.relist()
                self.watch_once()
                failures = 0
            except ApiException as error:
                if error.status == 410:
                    log.info("%s: resourceVersion expired, relisting", self.kind.name)
                    self.resource_version = None
                    continue
                failures = self._back_off(error, failures)
            except Exception as error:
                if self.stopped.is_set():
                    return
                failures = self._back_off(error, failures)

    def _back_off(self, error: BaseException, failures: int) -> int:
        self.last_error = error
        if not is_transient(error):
            log.error("%s: %s", self.kind.name, error)
        self.stopped.wait(self.retry.delay(min(failures, 8)))
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


def _shut(response: Any) -> None:
    """Cut a streaming response's socket, unblocking the thread reading it."""
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
