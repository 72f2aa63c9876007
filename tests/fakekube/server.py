"""The fake API server over HTTP: a ThreadingHTTPServer in front of the in-memory store.

Use it in a test as a context manager (`with FakeKube() as kube: kube.url`) or run it as a
process (`python -m tests.fakekube --port N --seed objects.yaml`). Other processes drive it
through `/_fake/...`:
    POST   /_fake/objects   an object or a list of objects, stored as given (status included)
    POST   /_fake/faults    {"path": regex, "method": "POST", "count": N, "status": 503 |
                            "drop": true | "drop_after": true | "latency": seconds}
    DELETE /_fake/faults    disarm every fault
    GET    /_fake/requests  the request log (method, path, query, content type, body, status)
    DELETE /_fake/requests  clear the log
    POST   /_fake/compact   forget the event history (older resourceVersions now expire)
    POST   /_fake/restart   kube-apiserver restarts: open watches cut, history forgotten
    POST   /_fake/expire    etcd compacts under the open watches: each gets a 410 ERROR event
    POST   /_fake/checkpoint, /_fake/restore   an etcd backup taken, then restored (objects and
                            resourceVersion go back: newer versions are "too large")
    POST   /_fake/settings  {"pod_grace_seconds": 5, "bookmark_interval": 1, "watch_delay": 1.5,
                            "too_large_wait": 3, ...}
    GET    /_fake/kubelet   the kubelet stand-in's options and the terminating pods
    POST   /_fake/kubelet   {"manual": true, "time_scale": 0.01, "admission": false,
                            "terminal_phase": "Succeeded"} sets options; then, in this order,
                            {"finish": true | {"namespace": ns, "name": n}} finishes terminating
                            pods, {"reject": [{"namespace", "name", "reason", "message"}]} arms
                            rejections, {"admit": true} admits bound Pending pods,
                            {"complete": [{"namespace", "name", "phase"}]} runs pods to the end
    GET    /_fake/overcommit  `FakeKube.overcommitted()`: [] when no node is over-committed
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from tests.fakekube import disruption, errors
from tests.fakekube.api import ApiLogic, Reply, Settings
from tests.fakekube.faults import FaultPlan, LoggedRequest
from tests.fakekube.kubelet import Kubelet
from tests.fakekube.overcommit import Overcommit, overcommitted
from tests.fakekube.resources import parse_path, resource_for_kind, served
from tests.fakekube.selectors import field_matcher, label_matcher
from tests.fakekube.store import Checkpoint, Obj, ObjectStore, meta
from tests.fakekube.watch import Cut, encode_event, stream_watch

VERSION = {"major": "1", "minor": "34", "gitVersion": "v1.34.0-fakekube", "platform": "linux/amd64"}


class FakeKube:
    """One fake cluster: its store, settings, faults; start/stop or use `with`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, event_window: int = 1000) -> None:
        self.store = ObjectStore(event_window)
        self.settings = Settings()
        self.faults = FaultPlan()
        self.kubelet = Kubelet(
            self.store,
            lambda: disruption.resync(self.store),
            lambda: float(self.settings.pod_grace_seconds),
        )
        self.logic = ApiLogic(self.store, self.settings, self.kubelet)
        self._httpd = _Server((host, port), _Handler)
        self._httpd.fake = self
        self._thread: threading.Thread | None = None
        self.backup: Checkpoint | None = None
        for namespace in ("default", "kube-system"):
            self.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeKube:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self.kubelet.start()
        return self

    def stop(self) -> None:
        self.kubelet.stop()
        self.store.close()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeKube:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the Python API for tests --------------------------------------------------------
    def add(self, obj: Obj) -> Obj:
        """Store an object as given (status included): seeding, not an API request."""
        resource = resource_for_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        if resource is None:
            raise ValueError(f"the fake does not serve {obj.get('apiVersion')} {obj.get('kind')}")
        obj = json.loads(json.dumps(obj))
        namespace = meta(obj).get("namespace")
        if resource.namespaced:
            namespace = meta(obj)["namespace"] = namespace or "default"
            if self.store.find(served("v1", "Namespace"), None, namespace) is None:
                self.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        if resource.plural == "pods":
            obj.setdefault("spec", {}).setdefault("schedulerName", "default-scheduler")
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        created = self.store.create(resource, obj)
        disruption.resync(self.store, resource)
        if resource.plural == "pods" and meta(created).get("deletionTimestamp"):
            self.kubelet.pod_terminating(created)
        return created

    def write_kubeconfig(self, path: str | Path) -> Path:
        """A kubeconfig pointing at this server (plain HTTP, a dummy token), for KUBECONFIG."""
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fakekube", "cluster": {"server": self.url}}],
            "users": [{"name": "fakekube", "user": {"token": "fakekube"}}],
            "contexts": [
                {"name": "fakekube", "context": {"cluster": "fakekube", "user": "fakekube"}}
            ],
            "current-context": "fakekube",
        }
        target = Path(path)
        target.write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
        return target

    def load(self, path: str | Path) -> list[Obj]:
        """Seed every object of a multi-document YAML file (`kind: List` documents unfold)."""
        added = []
        for doc in yaml.safe_load_all(Path(path).read_text()):
            for obj in doc.get("items", []) if doc and doc.get("kind") == "List" else [doc]:
                if obj:
                    added.append(self.add(obj))
        return added

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        resource = served(api_version, kind)
        return self.store.get(resource, namespace if resource.namespaced else None, name)

    def find(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        try:
            return self.get(api_version, kind, name, namespace)
        except errors.ApiError:
            return None

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        """Remove an object at once (no grace period), as a controller or a user would."""
        resource = served(api_version, kind)
        gone = self.store.delete(resource, namespace if resource.namespaced else None, name)
        disruption.resync(self.store, resource)
        return gone

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.find("v1", "Pod", name, namespace)

    def checkpoint(self) -> Checkpoint:
        """An etcd backup of this cluster as it stands (also kept for `restore()`)."""
        self.backup = self.store.checkpoint()
        return self.backup

    def restore(self, saved: Checkpoint | None = None) -> None:
        """etcd restored from `saved` (the last checkpoint by default), the API server
        restarted: objects and resourceVersion go back to it; open watches are cut."""
        backup = saved or self.backup
        if backup is None:
            raise ValueError("no checkpoint to restore")
        self.store.restore(backup)
        disruption.resync(self.store)

    def restart(self) -> None:
        """kube-apiserver restarts: open watches cut, the watch history forgotten."""
        self.store.restart()

    def overcommitted(self) -> list[Overcommit]:
        """Every node or card whose holders ask for more than it has, from this fake's own
        state: bound non-terminal pods (terminating included) against the Node's allocatable,
        and card claims against the node's Device. [] when nothing is over-committed."""
        return overcommitted(self.store)


def _apf_headers(retry_after: int) -> dict[str, str]:
    # What the APF filter sets on a rejection (the UIDs are the fake's own, fixed).
    return {
        "Retry-After": str(retry_after),
        "X-Content-Type-Options": "nosniff",
        "X-Kubernetes-Pf-Flowschema-Uid": "fakekube-flowschema",
        "X-Kubernetes-Pf-Prioritylevel-Uid": "fakekube-prioritylevel",
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeKube

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (a stopped watch, a closed pool) are normal; anything else is a bug.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Dropped(Exception):
    """The connection is to be closed without an answer."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Go's net package sets TCP_NODELAY on every connection kube-apiserver accepts; without
        # it the headers and the body, written apart, wait out Nagle against the client's
        # delayed ACK (40 ms a request).
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log replaces stderr noise

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # --- plumbing ------------------------------------------------------------------------
    def _serve(self, method: str) -> None:
        fake = self.server.fake
        parts = urlsplit(self.path)
        path, query = parts.path, dict(parse_qsl(parts.query, keep_blank_values=True))
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw.strip() else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")

        delay, arrived, retry_after = 0.0, time.monotonic(), None

        # Logged before the answer goes out, so a client that got its answer finds it logged.
        def record(status: int | None) -> None:
            entry = LoggedRequest(
                method, path, parts.query, content_type, body, status, delay, arrived, retry_after
            )
            fake.faults.log(entry)

        self._record = record
        try:
            if path.startswith("/_fake/"):
                self._reply(self._admin(method, path, body))
                return
            delay, fault = fake.faults.take(method, path)
            if delay:
                time.sleep(delay)
            if fault is not None and fault.drop:
                raise _Dropped
            if fault is not None and fault.status == 429 and fault.apf:
                retry_after = fault.retry_after
                self._reply(Reply(429, errors.APF_REJECTION, _apf_headers(retry_after)))
                return
            if fault is not None and fault.status:
                raise errors.injected(fault.status)
            if isinstance(body, str):
                raise errors.bad_request(f"the request body is not JSON: {body[:80]}")
            if method == "GET" and query.get("watch") in ("true", "1"):
                self._watch(path, query)
                return
            reply = self._dispatch(method, path, query, content_type, body)
            if fault is not None and fault.drop_after:
                raise _Dropped
            self._reply(reply)
        except errors.ApiError as error:
            headers = {"Retry-After": str(error.retry_after)} if error.retry_after else {}
            retry_after = error.retry_after
            self._reply(Reply(error.code, error.body, headers))
        except _Dropped:
            record(None)
            self._drop()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _dispatch(
        self, method: str, path: str, query: dict[str, str], content_type: str, body: Any
    ) -> Reply:
        logic = self.server.fake.logic
        if path == "/version":
            return Reply(200, VERSION, {})
        if path in ("/healthz", "/readyz", "/livez"):
            return Reply(200, "ok", {})
        route = parse_path(path)
        if route is None:
            raise errors.path_not_found()
        if route.subresource in {"binding", "eviction"} and method != "POST":
            raise errors.method_not_allowed(method)
        body = body if body is not None else {}
        if method == "GET":
            return logic.get(route) if route.name else logic.list(route, query)
        if method == "POST":
            return logic.create(route, body)
        if route.name is None:
            raise errors.method_not_allowed(method)
        if method == "PUT":
            return logic.replace(route, body)
        if method == "PATCH":
            return logic.patch(route, content_type, body)
        return logic.delete(route, body, query)

    def _admin(self, method: str, path: str, body: Any) -> Reply:
        fake = self.server.fake
        if path == "/_fake/faults" and method == "POST":
            fake.faults.add(**(body or {}))
        elif path == "/_fake/faults" and method == "DELETE":
            fake.faults.clear()
        elif path == "/_fake/requests" and method == "DELETE":
            fake.faults.requests.clear()
        elif path == "/_fake/objects" and method == "POST":
            for obj in body if isinstance(body, list) else [body]:
                fake.add(obj)
        elif path == "/_fake/compact" and method == "POST":
            fake.store.compact()
        elif path == "/_fake/restart" and method == "POST":
            fake.store.restart()
        elif path == "/_fake/expire" and method == "POST":
            fake.store.expire_watches()
        elif path == "/_fake/checkpoint" and method == "POST":
            fake.backup = fake.store.checkpoint()
        elif path == "/_fake/restore" and method == "POST":
            fake.restore()
        elif path == "/_fake/kubelet":
            return Reply(200, self._kubelet_admin(method, body or {}), {})
        elif path == "/_fake/overcommit" and method == "GET":
            return Reply(200, [o.as_json() for o in fake.overcommitted()], {})
        elif path == "/_fake/settings" and method == "POST":
            for key, value in (body or {}).items():
                if not hasattr(fake.settings, key):
                    raise errors.bad_request(f"unknown setting {key!r}")
                setattr(fake.settings, key, value)
        elif not (path in ("/_fake/faults", "/_fake/requests") and method == "GET"):
            raise errors.path_not_found()
        return Reply(200, fake.faults.as_json(), {})

    def _kubelet_admin(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        kubelet = self.server.fake.kubelet
        answer: dict[str, Any] = {}
        if method == "POST":
            actions = ("finish", "reject", "admit", "complete")
            kubelet.configure(**{k: v for k, v in body.items() if k not in actions})
            finish = body.get("finish")
            if finish:
                where = finish if isinstance(finish, dict) else {}
                done = kubelet.finish_terminating(where.get("namespace"), where.get("name"))
                answer["finished"] = [{"namespace": ns, "name": n} for ns, n in done]
            for item in body.get("reject") or []:
                kubelet.reject_next_admission(**item)
            if body.get("admit"):
                verdicts = kubelet.admit_pending()
                answer["admitted"] = {k: v.admitted for k, v in verdicts.items()}
            for item in body.get("complete") or []:
                kubelet.complete(item["namespace"], item["name"], item.get("phase", "Succeeded"))
        elif method != "GET":
            raise errors.method_not_allowed(method)
        return {**kubelet.state(), **answer}

    def _reply(self, reply: Reply) -> None:
        self._record(reply.code)
        payload = (
            reply.body.encode() if isinstance(reply.body, str) else json.dumps(reply.body).encode()
        )
        self.send_response(reply.code)
        kind = "text/plain" if isinstance(reply.body, str) else "application/json"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _watch(self, path: str, query: dict[str, str]) -> None:
        fake = self.server.fake
        route = parse_path(path)
        if route is None:
            raise errors.path_not_found()
        # Selectors are checked before the 200 goes out, so a bad one is a plain 400.
        label_matcher(query.get("labelSelector"))
        field_matcher(query.get("fieldSelector"), route.resource)
        self._record(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(event: dict[str, Any]) -> None:
            data = encode_event(event)
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        try:
            stream_watch(fake.store, fake.settings, route, query, send)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Cut:
            self._drop()
        # A watch that ended (its timeoutSeconds ran out) leaves the connection open for the
        # next request, as kube-apiserver's HTTP/1.1 server does: the client's pool reuses it.

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
