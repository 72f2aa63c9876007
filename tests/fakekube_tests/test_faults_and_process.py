"""Fault injection, the request log, the admin endpoints and the server run as a process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.fakekube import FakeKube
from tests.fakekube.testing import node

ROOT = Path(__file__).resolve().parents[2]


def test_the_next_requests_answer_the_injected_status(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.faults.add(path="/api/v1/nodes$", status=503, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            core.list_node()
        assert caught.value.status == 503
        assert json.loads(caught.value.body)["reason"] == "ServiceUnavailable"
    assert core.list_node().items == []
    assert [r.status for r in kube.faults.requests_to("/api/v1/nodes$")] == [503, 503, 200]


def test_429_faults_carry_retry_after(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.faults.add(path="nodes", status=429)
    with pytest.raises(ApiException) as caught:
        core.list_node()
    assert caught.value.headers["Retry-After"] == "1"


def test_a_dropped_connection_reaches_the_client(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.faults.add(path="nodes", drop=True)
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.list_node()
    assert core.list_node().items == []


def test_drop_after_processing_keeps_the_write(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.faults.add(path="/api/v1/nodes$", method="POST", drop_after=True)
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.create_node(node("node-1"))
    assert kube.find("v1", "Node", "node-1") is not None


def test_latency_slows_matching_requests_only(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.faults.add(path="nodes", latency=0.3)
    core.list_node()
    core.list_namespace()
    # The server's own log says which request waited, and how long: no clock in the test.
    assert [(r.path, r.delay, r.status) for r in kube.faults.requests] == [
        ("/api/v1/nodes", 0.3, 200),
        ("/api/v1/namespaces", 0.0, 200),
    ]


def test_admin_endpoints(kube: FakeKube) -> None:
    http = urllib3.PoolManager()
    http.request("POST", f"{kube.url}/_fake/objects", json=[node("node-1"), node("node-2")])
    http.request("POST", f"{kube.url}/_fake/faults", json={"path": "nodes", "status": 500})
    assert http.request("GET", f"{kube.url}/api/v1/nodes").status == 500
    listed = http.request("GET", f"{kube.url}/api/v1/nodes").json()
    assert [n["metadata"]["name"] for n in listed["items"]] == ["node-1", "node-2"]
    http.request("POST", f"{kube.url}/_fake/settings", json={"pod_grace_seconds": 2.5})
    assert kube.settings.pod_grace_seconds == 2.5
    log = http.request("GET", f"{kube.url}/_fake/requests").json()["requests"]
    assert [r["status"] for r in log if r["path"] == "/api/v1/nodes"] == [500, 200]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_runs_as_a_process_with_seed_objects(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: team-a}\n"
        "spec: {schedulerName: koordweb, containers: [{name: c, image: x}]}\n"
    )
    port = free_port()
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakekube",
            "--port",
            str(port),
            "--seed",
            str(seed),
            "--kubeconfig",
            str(kubeconfig),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == f"fakekube serving on http://127.0.0.1:{port}"
        core = client.CoreV1Api(
            client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}"))
        )
        assert [n.metadata.name for n in core.list_node().items] == ["node-1"]
        pods = core.list_namespaced_pod("team-a").items
        assert pods[0].spec.scheduler_name == "koordweb"
        assert core.read_namespace("team-a").metadata.name == "team-a"
        loaded = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=loaded)
        assert loaded.host == f"http://127.0.0.1:{port}"
        via_kubeconfig = client.CoreV1Api(client.ApiClient(loaded))
        assert [n.metadata.name for n in via_kubeconfig.list_node().items] == ["node-1"]
    finally:
        process.terminate()
        process.wait(timeout=5)
    assert process.returncode == 0


def test_another_process_drives_the_kubelet_of_a_manual_fake(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n"
        "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '10'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: default}\n"
        "spec: {nodeName: node-1, containers: [{name: c, image: x}]}\n"
        "status: {phase: Running}\n"
    )
    port = free_port()
    command = [sys.executable, "-m", "tests.fakekube", "--port", str(port), "--seed", str(seed)]
    process = subprocess.Popen(
        [*command, "--kubelet-manual"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        process.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        core = client.CoreV1Api(client.ApiClient(client.Configuration(host=url)))
        core.delete_namespaced_pod("p1", "default")
        http = urllib3.PoolManager()
        state = json.loads(http.request("GET", f"{url}/_fake/kubelet").data)
        assert state["manual"] is True
        assert state["terminating"] == [{"namespace": "default", "name": "p1"}]
        finished = json.loads(
            http.request("POST", f"{url}/_fake/kubelet", json={"finish": True}).data
        )
        assert finished["finished"] == [{"namespace": "default", "name": "p1"}]
        assert core.list_namespaced_pod("default").items == []
    finally:
        process.terminate()
        process.wait(timeout=5)
