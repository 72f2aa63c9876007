"""The in-memory object store: one resourceVersion counter, objects per resource, an event window.

Every write bumps the counter and appends a watch event; only the last `event_window` events are
kept, so a watch (or continue token) from before the window is answered `410 Expired` as etcd
compaction makes the real server do.

Disruptions of a real control plane: `restart()` (kube-apiserver restarts: open watches are cut,
its new watch cache holds no history), `expire_watches()` (etcd compacts under open watches: each
gets a 410 ERROR event mid-stream), `checkpoint()` / `restore()` (etcd restored from a backup:
objects and resourceVersion go back, so a client's newer version is "too large").
"""

from __future__ import annotations

import bisect
import copy
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.fakekube import errors
from tests.fakekube.resources import ResourceType

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(obj: Obj) -> dict[str, Any]:
    return obj.setdefault("metadata", {})  # type: ignore[no-any-return]


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    resource: ResourceType
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj
    old: Obj | None
    at: float = field(default_factory=time.monotonic)  # when it was written


@dataclass(frozen=True)
class Checkpoint:
    """The store as a backup holds it: objects and the resourceVersion."""

    rv: int
    objects: dict[ResourceType, dict[Key, Obj]]


class ObjectStore:
    """Objects and their history; all methods are thread safe and return deep copies."""

    def __init__(self, event_window: int = 1000) -> None:
        self.cond = threading.Condition()
        self.event_window = event_window
        self._rv = 1000
        self._horizon = self._rv  # the oldest resourceVersion a watch may still start from
        self._objects: dict[ResourceType, dict[Key, Obj]] = {}
        self._events: deque[WatchEvent] = deque()
        self.closed = False
        # Bumped when open watches must end: `interruption` says how ("drop" or "expire").
        self.generation = 0
        self.interruption = ""

    # --- reading -------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        with self.cond:
            return self._rv

    @property
    def horizon(self) -> int:
        with self.cond:
            return self._horizon

    def get(self, resource: ResourceType, namespace: str | None, name: str) -> Obj:
        with self.cond:
            found = self._objects.get(resource, {}).get((namespace or "", name))
            if found is None:
                raise errors.not_found(resource, name)
            return copy.deepcopy(found)

    def find(self, resource: ResourceType, namespace: str | None, name: str) -> Obj | None:
        with self.cond:
            found = self._objects.get(resource, {}).get((namespace or "", name))
            return copy.deepcopy(found) if found is not None else None

    def select(
        self,
        resource: ResourceType,
        namespace: str | None,
        matches: Callable[[Obj], bool] = lambda obj: True,
    ) -> tuple[list[Obj], int]:
        """Matching objects in key order (namespace, name), and the list's resourceVersion."""
        items, rv, _ = self.page(resource, namespace, matches)
        return items, rv

    def page(
        self,
        resource: ResourceType,
        namespace: str | None,
        matches: Callable[[Obj], bool] | None = None,
        after: Key | None = None,
        limit: int = 0,
    ) -> tuple[list[Obj], int, int | None]:
        """One page of a list: up to `limit` objects with keys after `after` (copied), the
        resourceVersion, and how many objects remain past the page: a count without a
        selector, 1 for "some" with one (the real server omits remainingItemCount then), or 0."""
        with self.cond:
            bucket = self._objects.get(resource, {})
            keys = sorted(bucket)
            start = bisect.bisect_right(keys, after) if after is not None else 0
            chosen: list[Key] = []
            remaining: int | None = 0
            for position in range(start, len(keys)):
                key = keys[position]
                if namespace is not None and key[0] != namespace:
                    continue
                if matches is not None and not matches(bucket[key]):
                    continue
                if limit and len(chosen) == limit:
                    remaining = (
                        None
                        if matches is not None
                        else sum(namespace is None or k[0] == namespace for k in keys[position:])
                    )
                    break
                chosen.append(key)
            items = [copy.deepcopy(bucket[key]) for key in chosen]
            return items, self._rv, remaining

    def events_after(self, resource: ResourceType, rv: int) -> list[WatchEvent]:
        """Events of one resource newer than `rv`; 410 when `rv` fell out of the window."""
        with self.cond:
            if rv < self._horizon:
                raise errors.expired(f"too old resource version: {rv} ({self._horizon})")
            return [e for e in self._events if e.rv > rv and e.resource is resource]

    # --- writing -------------------------------------------------------------------------
    def _record(self, resource: ResourceType, kind: str, obj: Obj, old: Obj | None) -> None:
        self._events.append(WatchEvent(self._rv, resource, kind, copy.deepcopy(obj), old))
        while len(self._events) > self.event_window:
            self._horizon = self._events.popleft().rv
        self.cond.notify_all()

    def create(self, resource: ResourceType, obj: Obj) -> Obj:
        with self.cond:
            metadata = meta(obj)
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:5]
            key = (metadata.get("namespace") or "", metadata["name"])
            bucket = self._objects.setdefault(resource, {})
            if key in bucket:
                raise errors.already_exists(resource, key[1])
            self._rv += 1
            obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
            metadata.setdefault("uid", str(uuid.uuid4()))
            metadata.setdefault("creationTimestamp", now_rfc3339())
            metadata["resourceVersion"] = str(self._rv)
            if resource.custom or resource.plural in {"pods", "poddisruptionbudgets"}:
                metadata.setdefault("generation", 1)
            bucket[key] = copy.deepcopy(obj)
            self._record(resource, "ADDED", obj, None)
            return copy.deepcopy(obj)

    def update(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        change: Callable[[Obj], Obj],
    ) -> Obj:
        """Read-modify-write under the lock; `change` may raise ApiError to refuse."""
        with self.cond:
            key = (namespace or "", name)
            current = self._objects.get(resource, {}).get(key)
            if current is None:
                raise errors.not_found(resource, name)
            updated = change(copy.deepcopy(current))
            metadata = meta(updated)
            metadata["name"], metadata["uid"] = name, current["metadata"]["uid"]
            if namespace:
                metadata["namespace"] = namespace
            metadata["creationTimestamp"] = current["metadata"].get("creationTimestamp")
            updated["apiVersion"], updated["kind"] = resource.api_version, resource.kind
            metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
            if updated == current:
                return copy.deepcopy(current)  # a no-op write does not bump resourceVersion
            if "generation" in current["metadata"]:
                # A spec change bumps generation, and so does the start of a graceful deletion.
                bumped = updated.get("spec") != current.get("spec") or bool(
                    metadata.get("deletionTimestamp")
                    and not current["metadata"].get("deletionTimestamp")
                )
                metadata["generation"] = current["metadata"]["generation"] + int(bumped)
            self._rv += 1
            metadata["resourceVersion"] = str(self._rv)
            self._objects[resource][key] = copy.deepcopy(updated)
            self._record(resource, "MODIFIED", updated, copy.deepcopy(current))
            return copy.deepcopy(updated)

    def delete(self, resource: ResourceType, namespace: str | None, name: str) -> Obj:
        with self.cond:
            key = (namespace or "", name)
            current = self._objects.get(resource, {}).pop(key, None)
            if current is None:
                raise errors.not_found(resource, name)
            self._rv += 1
            gone = copy.deepcopy(current)
            gone["metadata"]["resourceVersion"] = str(self._rv)
            self._record(resource, "DELETED", gone, current)
            return gone

    def compact(self) -> None:
        """Forget all history, as etcd compaction does: older resourceVersions now expire."""
        with self.cond:
            self._events.clear()
            self._horizon = self._rv

    def interrupt(self, how: str) -> None:
        """End every open watch: "drop" cuts its connection, "expire" sends a 410 ERROR."""
        with self.cond:
            self.generation += 1
            self.interruption = how
            self.cond.notify_all()

    def restart(self) -> None:
        """kube-apiserver restarting: watches cut, and its new watch cache starts at the
        current resourceVersion (older ones are answered 410)."""
        self.compact()
        self.interrupt("drop")

    def expire_watches(self) -> None:
        """etcd compacted past the open watches: each gets a 410 ERROR event and ends."""
        self.compact()
        self.interrupt("expire")

    def checkpoint(self) -> Checkpoint:
        with self.cond:
            return Checkpoint(self._rv, copy.deepcopy(self._objects))

    def restore(self, saved: Checkpoint) -> None:
        """etcd restored from `saved`: its objects and resourceVersion come back, the history
        goes, and the API server restarts (watches cut). A client's version newer than `saved`
        is now ahead of the server: 504 ResourceVersionTooLarge."""
        with self.cond:
            self._objects = copy.deepcopy(saved.objects)
            self._rv = saved.rv
            self._events.clear()
            self._horizon = self._rv
        self.interrupt("drop")

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
