"""Watch streams: newline-delimited JSON events over a chunked response, as kube-apiserver sends.

Without a resourceVersion (or with "0") the stream opens with a synthetic ADDED per object; with
one, it replays the retained events after it, or sends a single ERROR event carrying the
`410 Expired` Status when that version has left the window. Selectors turn an object moving in or
out of the selection into ADDED / DELETED, like the server's watch filter.

As kube-apiserver's cacher does: a version newer than the store waits up to `too_large_wait`,
then the stream is one ERROR event with the 504 ResourceVersionTooLarge Status (HTTP 200: the
watch had started); BOOKMARKs (allowWatchBookmarks) carry the version the stream has reached;
the stream ends after timeoutSeconds. `watch_delay` holds each event back that long after its
write; the store's interruptions end open streams (a 410 ERROR mid-stream, or a cut connection).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.fakekube import errors
from tests.fakekube.api import Settings, wait_until_fresh
from tests.fakekube.resources import Route
from tests.fakekube.selectors import field_matcher, label_matcher
from tests.fakekube.store import Obj, ObjectStore, WatchEvent, meta

Send = Callable[[dict[str, Any]], None]


class Cut(Exception):
    """The server went away under the stream: close the connection without a last chunk."""


EXPIRED_MID_STREAM = "The resourceVersion for the provided watch is too old."


def _translate(event: WatchEvent, matches: Callable[[Obj], bool]) -> str | None:
    now = matches(event.obj)
    before = event.old is not None and matches(event.old)
    if event.type == "DELETED":
        return "DELETED" if before else None
    if event.type == "ADDED":
        return "ADDED" if now else None
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if before else None


def stream_watch(
    store: ObjectStore, settings: Settings, route: Route, query: dict[str, str], send: Send
) -> None:
    """Validate, then send events until the timeout, the server closing or the client leaving."""
    resource = route.resource
    labels = label_matcher(query.get("labelSelector"))
    fields = field_matcher(query.get("fieldSelector"), resource)

    def matches(obj: Obj) -> bool:
        in_scope = route.namespace is None or meta(obj).get("namespace") == route.namespace
        if route.name is not None and meta(obj).get("name") != route.name:
            return False
        return in_scope and labels(obj) and fields(obj)

    timeout = float(query.get("timeoutSeconds") or settings.watch_timeout)
    deadline = time.monotonic() + timeout
    bookmarks = query.get("allowWatchBookmarks") == "true"
    next_bookmark = time.monotonic() + settings.bookmark_interval
    requested = query.get("resourceVersion") or "0"
    generation = store.generation
    if requested == "0":
        items, cursor = store.select(resource, route.namespace, matches)
        for item in items:
            send({"type": "ADDED", "object": item})
    else:
        try:
            wait_until_fresh(store, settings, requested)
        except errors.ApiError as too_large:
            send({"type": "ERROR", "object": too_large.body})
            return
        cursor = int(requested)
    while True:
        with store.cond:
            if store.generation != generation:
                if store.interruption == "expire":
                    send({"type": "ERROR", "object": errors.expired(EXPIRED_MID_STREAM).body})
                    return
                raise Cut
            try:
                events = store.events_after(resource, cursor)
            except errors.ApiError as gone:
                send({"type": "ERROR", "object": gone.body})
                return
            snapshot_rv = store.resource_version
            due = time.monotonic() - settings.watch_delay
            if settings.watch_delay > 0:
                # Events not due yet stay back, and the stream has only reached the last one
                # sent: a bookmark must not claim a version past them.
                held = [e for e in events if e.at > due]
                if held:
                    events = [e for e in events if e.at <= due]
                    snapshot_rv = held[0].rv - 1
            if not events and not store.closed:
                wake = min(deadline, next_bookmark if bookmarks else deadline)
                if settings.watch_delay > 0 and snapshot_rv != store.resource_version:
                    wake = min(wake, _next_due(store, resource, cursor) + settings.watch_delay)
                wait = wake - time.monotonic()
                if wait > 0:
                    store.cond.wait(wait)
                    continue
        if store.closed:
            return
        for event in events:
            kind = _translate(event, matches)
            if kind is not None:
                send({"type": kind, "object": event.obj})
        # Every event of this resource up to the snapshot was read under the lock.
        cursor = max(cursor, snapshot_rv)
        now = time.monotonic()
        if bookmarks and now >= next_bookmark:
            bookmark = {
                "kind": resource.kind,
                "apiVersion": resource.api_version,
                "metadata": {"resourceVersion": str(cursor)},
            }
            send({"type": "BOOKMARK", "object": bookmark})
            next_bookmark = now + settings.bookmark_interval
        if now >= deadline:
            return


def _next_due(store: ObjectStore, resource: Any, cursor: int) -> float:
    """When the oldest event past `cursor` was written (now when there is none)."""
    pending = store.events_after(resource, cursor)
    return pending[0].at if pending else time.monotonic()


def encode_event(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"
