"""Test helpers around the fake server: manifest builders, a fixture body and a polling wait.

A conftest declares the fixture with `kube = pytest.fixture(fake_kube, name="kube")`.
"""

from __future__ import annotations

import json
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


# --- a small Koordinator cluster: one spine, two blocks of two 16-CPU nodes ------------------

GANG = "gang.scheduling.koordinator.sh"
LAYOUT = {"node-1": "b1", "node-2": "b1", "node-3": "b2", "node-4": "b2"}
TOPOLOGY: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "ClusterNetworkTopology",
    "metadata": {"name": "default"},
    "spec": {
        "networkTopologySpec": [
            {"topologyLayer": "SpineLayer", "labelKey": ["network.topology.nvidia.com/spine"]},
            {
                "topologyLayer": "BlockLayer",
                "parentTopologyLayer": "SpineLayer",
                "labelKey": ["network.topology.nvidia.com/block"],
            },
            {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
        ]
    },
}


def block_node(name: str, block: str, spine: str = "s1", cpu: str = "16") -> dict[str, Any]:
    """A Ready node placed in the topology by its spine and block labels."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "network.topology.nvidia.com/spine": spine,
                "network.topology.nvidia.com/block": block,
            },
        },
        "status": {
            "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def seed_blocks(fake: FakeKube) -> None:
    """LAYOUT's nodes and the `default` ClusterNetworkTopology."""
    for name, block in LAYOUT.items():
        fake.add(block_node(name, block))
    fake.add(TOPOLOGY)


def gang_pods(
    name: str,
    count: int,
    priority: int,
    *,
    cpu: str = "16",
    memory: str | None = None,
    layer: str = "BlockLayer",
    namespace: str = "ml",
) -> list[dict[str, Any]]:
    """`count` pods of our scheduler joined by Koordinator gang annotations, MustGather `layer`."""
    rule = json.dumps({"gatherStrategy": [{"layer": layer, "strategy": "MustGather"}]})
    requests = {"cpu": cpu, **({"memory": memory} if memory else {})}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": namespace,
                "annotations": {
                    f"{GANG}/name": name,
                    f"{GANG}/min-available": str(count),
                    f"{GANG}/total-number": str(count),
                    f"{GANG}/network-topology-spec": rule,
                },
            },
            "spec": {
                "schedulerName": "koordweb",
                "priority": priority,
                "containers": [
                    {"name": "main", "image": "trainer", "resources": {"requests": requests}}
                ],
            },
        }
        for i in range(count)
    ]


# --- accelerator nodes for the kubelet stand-in ------------------------------------------------


def gpu_node(name: str, gpus: int = 8, cpu: str = "64", **labels: str) -> dict[str, Any]:
    """A Ready node offering `gpus` nvidia.com/gpu besides cpu, memory and pods."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": {
                "cpu": cpu,
                "memory": "512Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
            },
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def gpu_pod(name: str, gpus: int, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A pod of one container asking for `gpus` nvidia.com/gpu and one cpu."""
    body = pod(name, namespace, **spec)
    body["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
        "limits": {"nvidia.com/gpu": str(gpus)},
    }
    return body


def device(node_name: str, cards: int = 8) -> dict[str, Any]:
    """Koordinator's Device object for a node: `cards` gpus of 100 core / 100 memory ratio."""
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": node_name},
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "minor": minor,
                    "health": True,
                    "resources": {
                        "koordinator.sh/gpu-core": "100",
                        "koordinator.sh/gpu-memory-ratio": "100",
                    },
                }
                for minor in range(cards)
            ]
        },
    }
