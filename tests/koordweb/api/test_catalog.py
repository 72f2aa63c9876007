"""Catalog endpoints: nodes, devices, topology, quotas, priority classes, rounds, preemptions."""

from __future__ import annotations

import pytest

from koordweb.models import ElasticQuota, JobState, Node
from tests import builders as f

V1 = "/api/v1/"


def test_nodes_list_with_allocation(alice_api, world, django_assert_max_num_queries):
    job = f.JobFactory(cluster=world.cluster, quota=world.team_b, state=JobState.RUNNING)
    f.PodFactory(job=job, node=world.nodes[0], phase="Running", requests={"cpu": 4000})
    for i in range(10):
        f.NodeFactory(cluster=world.cluster, name=f"extra-{i}")
    with django_assert_max_num_queries(6):
        body = alice_api.get(V1 + "nodes/?ordering=name").json()
    assert body["count"] == 14
    node0 = next(n for n in body["results"] if n["name"] == "node-0")
    assert node0["allocated"] == {"cpu": 4000}
    assert node0["device_count"] == 8
    assert "pods" not in node0  # other tenants' pods are not listed on nodes


def test_devices_filter_by_node(alice_api, world, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        body = alice_api.get(V1 + "devices/?node=node-1&limit=100").json()
    assert body["count"] == 8
    assert {d["node_name"] for d in body["results"]} == {"node-1"}


def test_topology_tree_with_free_slots(alice_api, world):
    f.NodeFactory(cluster=world.cluster, name="stray", labels={})
    body = alice_api.get(V1 + "topology/?shape=nvidia.com/gpu=4,cpu=8").json()
    domains = {d["key"]: d for d in body["domains"]}
    assert body["layers"] == ["SpineLayer", "BlockLayer"]
    assert domains["ClusterTopologyLayer/"]["free_slots"] == 8  # 4 nodes x 2 pods of 4 GPUs
    assert domains["SpineLayer/s0"]["free_slots"] == 4
    assert domains["BlockLayer/b1"]["parent"] == "SpineLayer/s0"
    assert body["outside"] == ["stray"]
    no_shape = alice_api.get(V1 + "topology/").json()
    assert no_shape["domains"][0]["free_slots"] is None


def test_topology_bad_shape_is_400(alice_api, world):
    response = alice_api.get(V1 + "topology/?shape=cpu=lots")
    assert response.status_code == 400
    assert "cpu" in response.json()["shape"][0]


def test_quota_tree_for_tenant_and_admin(alice_api, admin_api, world):
    job = f.JobFactory(cluster=world.cluster, quota=world.team_a, state=JobState.RUNNING)
    f.PodFactory(job=job, node=world.nodes[0], phase="Running", requests={"nvidia.com/gpu": 2})
    mine = alice_api.get(V1 + "quotas/tree/").json()
    assert [(r["name"], r["depth"]) for r in mine] == [("root", 0), ("team-a", 1)]
    assert mine[1]["used"] == {"nvidia.com/gpu": 2}
    assert mine[0]["used"] == {"nvidia.com/gpu": 2}  # summed into the parent
    everything = admin_api.get(V1 + "quotas/tree/").json()
    assert [r["name"] for r in everything] == ["root", "team-a", "team-b"]


def test_quota_members_hidden_from_tenants(alice_api, admin_api, world):
    assert alice_api.get(f"{V1}quotas/{world.team_a.pk}/").json()["members"] == []
    assert admin_api.get(f"{V1}quotas/{world.team_a.pk}/").json()["members"] == ["alice"]
    assert alice_api.get(f"{V1}quotas/{world.team_b.pk}/").status_code == 404


def test_admin_creates_updates_deletes_catalog_rows(admin_api, world):
    created = admin_api.post(
        V1 + "nodes/",
        {"cluster": "default", "name": "node-new", "allocatable": {"cpu": 8000}},
        format="json",
    )
    assert created.status_code == 201, created.content
    node_id = created.json()["id"]
    patched = admin_api.patch(f"{V1}nodes/{node_id}/", {"unschedulable": True}, format="json")
    assert patched.status_code == 200 and Node.objects.get(pk=node_id).unschedulable
    assert admin_api.delete(f"{V1}nodes/{node_id}/").status_code == 204
    quota = admin_api.post(
        V1 + "quotas/",
        {"cluster": "default", "name": "team-c", "parent": world.team_a.pk, "members": ["bob"]},
        format="json",
    )
    assert quota.status_code == 201, quota.content
    assert list(
        ElasticQuota.objects.get(name="team-c").members.values_list("username", flat=True)
    ) == ["bob"]
    pc = admin_api.post(
        V1 + "priority-classes/",
        {"cluster": "default", "name": "koord-free", "value": 1000},
        format="json",
    )
    assert pc.status_code == 201


def test_deleting_a_referenced_quota_is_409(admin_api, world):
    f.JobFactory(cluster=world.cluster, quota=world.team_a)
    response = admin_api.delete(f"{V1}quotas/{world.team_a.pk}/")
    assert response.status_code == 409
    assert ElasticQuota.objects.filter(pk=world.team_a.pk).exists()


def test_quota_parent_cycle_is_refused(admin_api, world):
    response = admin_api.patch(
        f"{V1}quotas/{world.team_a.pk}/".replace(str(world.team_a.pk), str(world.team_a.parent_id)),
        {"parent": world.team_a.pk},
        format="json",
    )
    assert response.status_code == 400 and "cycle" in response.json()["parent"][0]


@pytest.mark.parametrize(
    "path", ["nodes/", "devices/", "quotas/", "priority-classes/", "topology/layers/"]
)
def test_tenants_cannot_write_catalog(alice_api, world, path):
    before = alice_api.get(V1 + path).json()["count"]
    response = alice_api.post(V1 + path, {"cluster": "default", "name": "x"}, format="json")
    assert response.status_code == 403
    assert alice_api.get(V1 + path).json()["count"] == before


def test_rounds_and_preemptions(
    alice_api, bob_api, admin_api, world, django_assert_max_num_queries
):
    f.RoundFactory(cluster=world.cluster, jobs_placed=3)
    mine = f.JobFactory(cluster=world.cluster, quota=world.team_a, name="mine")
    theirs = f.JobFactory(cluster=world.cluster, quota=world.team_b, name="theirs", priority=9)
    other = f.JobFactory(cluster=world.cluster, quota=world.team_b, name="other")
    touching = f.PreemptionFactory(preemptor=theirs, nominations={"default/theirs-0": "node-1"})
    f.VictimFactory(preemption=touching, job=mine)
    f.VictimFactory(preemption=touching, job=other)
    for _ in range(5):
        f.VictimFactory(preemption=f.PreemptionFactory(preemptor=theirs), job=other)
    assert alice_api.get(V1 + "rounds/").json()["results"][0]["jobs_placed"] == 3
    # One query more than the page's own: the viewer's visible jobs, read once for redaction.
    with django_assert_max_num_queries(7):
        seen = alice_api.get(V1 + "preemptions/").json()
    assert [p["id"] for p in seen["results"]] == [touching.pk]
    only = seen["results"][0]
    assert [v["job_name"] for v in only["victims"]] == ["default/mine"]
    assert only["nominations"] == {}
    # The preemptor is team B's job: its priority, not its name or id (issue #16).
    assert only["preemptor"] == {"id": None, "name": None, "priority": 9}
    assert bob_api.get(V1 + "preemptions/").json()["count"] == 6
    assert admin_api.get(V1 + "preemptions/").json()["count"] == 6
    assert alice_api.get(f"{V1}preemptions/{touching.pk + 1}/").status_code == 404


@pytest.mark.parametrize(
    "path", ["quotas/", "priority-classes/", "rounds/", "topology/layers/", "quotas/tree/"]
)
def test_list_query_counts_are_flat(admin_api, world, path, django_assert_max_num_queries):
    for i in range(15):
        f.QuotaFactory(cluster=world.cluster, name=f"extra-{i}", parent=world.team_a)
        f.PriorityClassFactory(cluster=world.cluster, name=f"pc-{i}", value=i)
        f.RoundFactory(cluster=world.cluster)
        f.LayerFactory(cluster=world.cluster, name=f"L{i}", position=10 + i)
    with django_assert_max_num_queries(7):
        response = admin_api.get(V1 + path)
    assert response.status_code == 200
