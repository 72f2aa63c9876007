"""Helpers for tests that run koordweb against the fake API server through the real client: the
fixtures themselves are in tests/koordweb/conftest.py."""

from __future__ import annotations

from typing import Any

from kubernetes.client import CoreV1Api

from koordweb.backends.kube import KubeClusterClient, RetryPolicy
from tests.fakekube import FakeKube
from tests.fakekube.testing import RUNNING, eventually

PodPlace = tuple[str, str, str | None]  # namespace, name, node


def fast_retry(**overrides: Any) -> RetryPolicy:
    """The client's retry policy with test-sized delays."""
    return RetryPolicy(**{"attempts": 5, "base_delay": 0.01, "max_delay": 0.05, **overrides})


def running_pod(name: str, node: str, priority: int, labels: dict | None = None) -> dict:
    """A running 16-CPU pod of another scheduler in namespace batch, holding its node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "batch", "labels": labels or {}},
        "spec": {
            "nodeName": node,
            "priority": priority,
            "containers": [
                {"name": "main", "image": "x", "resources": {"requests": {"cpu": "16"}}}
            ],
        },
        "status": RUNNING,
    }


def _served(
    client: KubeClusterClient, *, settled: bool = False
) -> set[tuple[str, str, str | None]]:
    """The server's pods; with `settled`, none while any pod is still terminating."""
    pods = CoreV1Api(client.api).list_pod_for_all_namespaces().items
    if settled and any(p.metadata.deletion_timestamp for p in pods):
        return {("", "terminating", None)}
    return {(p.metadata.namespace, p.metadata.name, p.spec.node_name) for p in pods}


def _mirrored(client: KubeClusterClient) -> set[PodPlace]:
    docs = [d for d in client.snapshot() if d.get("kind") == "Pod"]
    return {
        (d["metadata"]["namespace"], d["metadata"]["name"], d["spec"].get("nodeName")) for d in docs
    }


def settle(kube: FakeKube, client: KubeClusterClient) -> None:
    """Wait until the mirror holds exactly the pods the fake server holds, on their nodes (a pod
    the server has deleted must be gone from the mirror too, or a round would still see it)."""
    eventually(lambda: _served(client) == _mirrored(client), timeout=10)


def caught_up(client: KubeClusterClient) -> bool:
    """No pod is terminating and the mirror holds exactly the server's pods, on their nodes."""
    return _served(client, settled=True) == _mirrored(client)
