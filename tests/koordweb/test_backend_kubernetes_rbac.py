"""docker/rbac.yaml grants every request the kubernetes backend makes, and nothing is missed."""

from __future__ import annotations

from pathlib import Path

import yaml

from koordweb.backends.kube import KubeClusterClient, gang_pods
from tests.fakekube import FakeKube
from tests.fakekube.faults import LoggedRequest
from tests.fakekube.resources import parse_path
from tests.fakekube.testing import RUNNING, eventually, node, pod
from tests.koordweb.kube_helpers import fast_retry

RBAC = Path(__file__).resolve().parents[2] / "docker" / "rbac.yaml"


def granted() -> set[tuple[str, str, str]]:
    role = next(d for d in yaml.safe_load_all(RBAC.read_text()) if d["kind"] == "ClusterRole")
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def needed(request: LoggedRequest) -> tuple[str, str, str]:
    route = parse_path(request.path)
    assert route is not None, request.path
    resource = route.resource.plural + (f"/{route.subresource}" if route.subresource else "")
    if request.method == "GET":
        verb = "watch" if "watch=true" in request.query else ("get" if route.name else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[
            request.method
        ]
    return route.resource.group, resource, verb


def test_the_cluster_role_covers_a_whole_round(kube: FakeKube) -> None:
    kube.add(node("node-1"))
    uid = kube.add(pod("placed", schedulerName="koordweb"))["metadata"]["uid"]
    kube.add(pod("victim", nodeName="node-1", status=RUNNING))
    kube.add(pod("preemptor", schedulerName="koordweb"))
    with KubeClusterClient.from_url(kube.url, retry=fast_retry(), watch_timeout=1) as cluster:
        cluster.snapshot()
        # Every kind's watch is open before the round goes on (and is checked below).
        eventually(
            lambda: (
                len({r.path for r in kube.faults.requests if "watch=true" in r.query})
                == len(cluster.mirror.reflectors)
            )
        )
        cluster.bind("default", "placed", uid, "node-1", annotations={"a": "b"}, labels={"c": "d"})
        cluster.evict("default", "victim", preemptor="default/preemptor")
        # A cancelled job's pods and a requeued gang's are deleted (the plan's deletions).
        assert cluster.pods.delete("default", "placed", uid)
        cluster.nominate("default", "preemptor", "node-1")
        cluster.apply_object(
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "ClusterNetworkTopology",
                "metadata": {"name": "default"},
                "spec": {"networkTopologySpec": []},
            }
        )
        cluster.apply_object(
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota",
                "metadata": {"name": "q"},
                "spec": {},
            }
        )
        cluster.create_job_pods(
            "default",
            gang_pods("job", {"spec": {"containers": []}}, 2),
            pod_group={
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "job"},
                "spec": {"minMember": 2},
            },
        )
    used = {needed(r) for r in kube.faults.requests if not r.path.startswith("/_fake")}
    assert used - granted() == set()
    assert ("", "pods/binding", "create") in used and ("", "pods/eviction", "create") in used
    assert ("", "pods/status", "patch") in used
    assert ("slo.koordinator.sh", "nodemetrics", "watch") in used
    assert ("", "pods", "delete") in used


def test_operations_names_every_custom_resource_the_backend_watches() -> None:
    """A cluster without one of these CRDs cannot be mirrored: the page lists them all."""
    from koordweb.backends.kube.kinds import WATCHED_KINDS

    text = (RBAC.parents[1] / "docs" / "operations.md").read_text()
    for kind in WATCHED_KINDS:
        if "." in kind.group:  # a custom resource (built-in groups: "", policy, scheduling.k8s.io)
            if kind.group == "scheduling.k8s.io":
                continue
            assert f"{kind.plural}.{kind.group}" in text, kind.plural
