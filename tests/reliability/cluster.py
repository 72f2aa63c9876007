"""The reliability scenarios' cluster and the checks every scenario ends with.

A fake API server holding four 16-CPU nodes in two blocks under one spine; gangs of small pods
(schedulerName koordweb, Koordinator gang annotations, MustGather per block). The checks read the
fake server's request log (what the API server accepted) and compare it with the database.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from koordweb.models import Cluster, Pod
from tests.fakekube import FakeKube
from tests.fakekube.resources import resource_for_kind
from tests.fakekube.testing import LAYOUT, gang_pods, seed_blocks

_BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")


def cluster_seed(kube: FakeKube) -> None:
    seed_blocks(kube)


def gang(name: str, count: int, cpu: int = 1, priority: int = 10) -> list[dict[str, Any]]:
    """A gang of `count` pods that must all land in one block."""
    return gang_pods(name, count, priority, cpu=str(cpu), memory="1Gi")


def kubeconfig_write(path: Path, url: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": url}}],
                "users": [{"name": "koordweb", "user": {"token": "reliability"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "koordweb"}}],
                "current-context": "fake",
            }
        )
    )
    return path


def our_pods(kube: FakeKube) -> dict[str, str | None]:
    """{namespace/name: nodeName or None} for every pod with our scheduler name."""
    resource = resource_for_kind("v1", "Pod")
    assert resource is not None
    pods, _ = kube.store.select(resource, None)
    return {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"].get("nodeName")
        for p in pods
        if p["spec"].get("schedulerName") == "koordweb"
    }


def successful_bindings(kube: FakeKube) -> Counter[str]:
    """How many binding requests the server accepted (2xx) per pod; >1 is a double bind."""
    accepted: Counter[str] = Counter()
    for request in kube.faults.requests_to(r"/binding$", "POST"):
        match = _BINDING.match(request.path)
        if match and request.status is not None and 200 <= request.status < 300:
            accepted[f"{match.group(1)}/{match.group(2)}"] += 1
    return accepted


def binding_attempts(kube: FakeKube) -> int:
    return len(kube.faults.requests_to(r"/binding$", "POST"))


def _gang_of(key: str) -> str:
    """ml/alpha-2 -> alpha (the builders above name pods <gang>-<index>)."""
    return key.split("/", 1)[1].rsplit("-", 1)[0]


def partly_bound_gangs(kube: FakeKube) -> dict[str, tuple[int, int]]:
    """{gang: (bound, size)} for every gang with some but not all pods bound."""
    sizes: Counter[str] = Counter()
    bound: Counter[str] = Counter()
    for key, node in our_pods(kube).items():
        name = _gang_of(key)
        sizes[name] += 1
        bound[name] += node is not None
    return {g: (bound[g], sizes[g]) for g in sizes if 0 < bound[g] < sizes[g]}


def gang_blocks(kube: FakeKube) -> dict[str, set[str]]:
    """{gang: the blocks its bound pods are on}: a MustGather gang has exactly one."""
    blocks: dict[str, set[str]] = {}
    for key, node in our_pods(kube).items():
        if node is not None:
            blocks.setdefault(_gang_of(key), set()).add(LAYOUT[node])
    return blocks


def database_disagreements(kube: FakeKube, cluster: Cluster) -> dict[str, tuple[Any, Any]]:
    """{pod: (node in the cluster, node in the database)} wherever the two differ."""
    rows = {
        f"{p.namespace}/{p.name}": (p.node.name if p.node else None)
        for p in Pod.objects.filter(cluster=cluster).select_related("node")
    }
    cluster_side = our_pods(kube)
    return {
        key: (node, rows.get(key, "missing"))
        for key, node in cluster_side.items()
        if rows.get(key, "missing") != node
    }
