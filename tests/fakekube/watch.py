"""Watch streams: newline-delimited JSON events over a chunked response, as kube-apiserver sends.

Without a resourceVersion (or with "0") the stream opens with a synthetic ADDED per object; with
one, it replays the retained events after it, or sends a single ERROR event carrying the
`410 Expired` Status when that version has left the window. Selectors turn an object moving in or
out of the selection into ADDED / DELETED, like the server's watch filter.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.fakekube import errors
from tests.fakekube.api import Settings
from tests.fakekube.resources import Route
from tests.fakekube.selectors import field_matcher, label_matcher
from tests.fakekube.store import Obj, ObjectStore, WatchEvent, meta

Send = Callable[[dict[str, Any]], None]


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
    if requested == "0":
        items, cursor = store.select(resource, route.namespace, matches)
        for item in items:
            send({"type": "ADDED", "object": item})
    else:
        cursor = int(requested)
    while True:
        with store.cond:
            try:
                events = store.events_after(resource, cursor)
            except errors.ApiError as gone:
                send({"type": "ERROR", "object": gone.body})
                return
            snapshot_rv = store.resource_version
            if not events and not store.closed:
                wait = min(deadline, next_bookmark if bookmarks else deadline) - time.monotonic()
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
        cursor = snapshot_rv
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


def encode_event(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"
