"""Test helpers around the fake server: manifest builders, a fixture body and a polling wait.

Test modules declare the fixture with `kube = pytest.fixture(fake_kube, name="kube")`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from tests.fakekube.server import FakeKube

RUNNING = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


def fake_kube() -> Iterator[FakeKube]:
    """A fake API server on a free port for the duration of a test."""
    with FakeKube() as fake:
        yield fake


def pod(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A one-container pod; `labels=` and `status=` go to their places, the rest into spec."""
    labels = spec.pop("labels", {})
    status = spec.pop("status", None)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }
    if status is not None:
        body["status"] = status
    return body


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}},
    }


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)
