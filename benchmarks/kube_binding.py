"""Binding throughput through the real `kubernetes` client against the in-repo fake API server
(issue #33 item 7).

    python -m benchmarks.kube_binding [--pods 5000] [--latency 0.005] [--parallelism 16]
        [--qps 1000] [--burst 2000] [--sequential-pods 300] [--json FILE]

The fake runs as its own process (so the client's CPU is this process's), every request to it
delayed by `--latency` seconds. `--pods` pending pods of our scheduler, 1 cpu each, are bound onto
100 nodes of 64 cpus, each binding with a device-allocation annotation: a PATCH then a POST. The
parallel run binds `--parallelism` at a time under the `--qps`/`--burst` budget; the sequential run
(one at a time, no budget) binds `--sequential-pods` and is extrapolated. After each run the fake's
own accounting (`GET /_fake/overcommit`) must be empty and every pod bound exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koordweb.settings.test")
django.setup()  # the plan's types live beside the models

from koordweb.backends.base import Binding, EnactPlan  # noqa: E402
from koordweb.backends.kube import KubeClusterClient  # noqa: E402
from koordweb.backends.kube.kinds import WATCHED_KINDS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NODES, NODE_CPU = 100, "64"
ANNOTATION = "scheduling.koordinator.sh/device-allocated"


class FakeProcess:
    """`python -m tests.fakekube` on a free port, its kubelet admission off (bindings only)."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                *("-m", "tests.fakekube", "--port", str(self.port)),
                *("--no-kubelet-admission", "--event-window", "100000"),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.process.stdout.readline()  # "fakekube serving on ..."

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=600) as answer:
            return json.loads(answer.read() or b"null")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def seed(fake: FakeProcess, pods: int) -> None:
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"node-{n}"},
            "status": {
                "allocatable": {"cpu": NODE_CPU, "memory": "512Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for n in range(NODES)
    ]
    fake.call("POST", "/_fake/objects", nodes)
    for start in range(0, pods, 1000):
        batch = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p-{i}", "namespace": "default"},
                "spec": {
                    "schedulerName": "koordweb",
                    "containers": [
                        {"name": "main", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            }
            for i in range(start, min(start + 1000, pods))
        ]
        fake.call("POST", "/_fake/objects", batch)


def run(args: argparse.Namespace, pods: int, parallelism: int, qps: float, burst: int) -> dict:
    fake = FakeProcess()
    try:
        seed(fake, pods)
        pod_kind = [k for k in WATCHED_KINDS if k.name == "pods"]
        with KubeClusterClient.from_url(
            fake.url, kinds=pod_kind, parallelism=parallelism, qps=qps, burst=burst
        ) as client:
            client.snapshot(timeout=120)
            docs = {d["metadata"]["name"]: d for d in client.mirror.documents("pods")}
            plan = EnactPlan(
                bindings=tuple(
                    Binding(
                        i,
                        "default",
                        f"p-{i}",
                        docs[f"p-{i}"]["metadata"]["uid"],
                        f"node-{i % NODES}",
                        {ANNOTATION: json.dumps({"cpuset": str(i % 64)})},
                    )
                    for i in range(pods)
                )
            )
            fake.call("DELETE", "/_fake/requests")
            fake.call(
                "POST", "/_fake/faults", {"path": ".*", "latency": args.latency, "count": 10**9}
            )
            wall0, cpu0 = time.perf_counter(), time.process_time()
            report = client.enact(plan)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            fake.call("DELETE", "/_fake/faults")
        state = fake.call("GET", "/_fake/faults")
        calls = [r for r in state["requests"] if "/pods/p-" in r["path"]]
        created = [r for r in calls if r["path"].endswith("/binding") and r["status"] == 201]
        overcommit = fake.call("GET", "/_fake/overcommit")
    finally:
        fake.stop()
    return {
        "pods": pods,
        "parallelism": parallelism,
        "qps": qps,
        "burst": burst,
        "latency_s": args.latency,
        "seconds": round(wall, 2),
        "bindings_per_s": round(pods / wall, 1),
        "calls": len(calls),
        "client_cpu_s": round(cpu, 2),
        "client_cpu_ms_per_call": round(1000 * cpu / max(len(calls), 1), 3),
        "bound": len(report.bound),
        "dropped": len(report.dropped),
        "bound_once": len(created) == pods,
        "overcommitted": overcommit,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--latency", type=float, default=0.005)
    parser.add_argument("--parallelism", type=int, default=16)
    parser.add_argument("--qps", type=float, default=1000.0)
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--sequential-pods", type=int, default=300)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/kube_binding.json")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    if args.sequential_pods:
        sequential = run(args, args.sequential_pods, 1, 0.0, 1)
        sequential["extrapolated_seconds"] = round(
            sequential["seconds"] * args.pods / args.sequential_pods, 1
        )
        results["sequential"] = sequential
        print("sequential", json.dumps(sequential), flush=True)
    parallel = run(args, args.pods, args.parallelism, args.qps, args.burst)
    results["parallel"] = parallel
    print("parallel", json.dumps(parallel), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    ok = parallel["overcommitted"] == [] and parallel["bound_once"] and not parallel["dropped"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
