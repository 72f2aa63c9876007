"""jobs/ with Content-Type: application/yaml: PodGroups and gang pods; unsafe YAML refused."""

from __future__ import annotations

import pytest

from koordweb.models import Job, Pod

JOBS = "/api/v1/jobs/"

POD_GROUP = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: bert
  namespace: default
  annotations:
    gang.scheduling.koordinator.sh/network-topology-spec: >-
      {"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}
spec:
  minMember: 2
"""


def pod(
    name: str, group: str = "bert", quota: str = "team-a", gpus: int = 2, spec_extra: str = ""
) -> str:
    """A pod of PodGroup `group` (none when empty) in `quota`; `spec_extra`: more spec lines."""
    member = f"    pod-group.scheduling.sigs.k8s.io: {group}\n" if group else ""
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels:
{member}    quota.scheduling.koordinator.sh/name: {quota}
spec:
  priorityClassName: koord-prod
{spec_extra}  containers:
  - name: main
    image: trainer
    resources:
      requests: {{cpu: "4", nvidia.com/gpu: "{gpus}"}}
"""


def yaml_post(client, text, **headers):
    return client.generic("POST", JOBS, text.encode(), content_type="application/yaml", **headers)


def test_pod_group_with_pods_is_one_job(alice_api, world):
    text = "---".join([POD_GROUP, pod("bert-0"), pod("bert-1")])
    response = yaml_post(alice_api, text, HTTP_IDEMPOTENCY_KEY="yaml-1")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.name, job.kind, job.owner, job.quota) == (
        "bert",
        "podgroup",
        world.alice,
        world.team_a,
    )
    assert job.topology_spec["gatherStrategy"][0]["layer"] == "BlockLayer"
    assert sorted(job.pods.values_list("name", flat=True)) == ["bert-0", "bert-1"]
    again = yaml_post(alice_api, text, HTTP_IDEMPOTENCY_KEY="yaml-1")
    assert again.status_code == 200 and again.json()["id"] == job.pk


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("a: &x [1]\nb: *x\n", "anchors are not allowed"),
        ("kind: Node\napiVersion: v1\nmetadata: {name: n9}\n", "PodGroups and Pods"),
        ("---".join([POD_GROUP, pod("bert-0", quota="team-b")]), "not a member"),
        ("key: [unclosed\n", "manifest"),
        (POD_GROUP.replace("BlockLayer", "RackLayer") + "---" + pod("bert-0"), "RackLayer"),
        (
            POD_GROUP
            + "---"
            + pod("bert-0").replace("  containers:", "  priority: 99999\n  containers:"),
            "priorityClassName",
        ),
        # The same resolve as a JSON submission: the priority class, one per job, and whether
        # the job could ever run (five 2-GPU pods gathered in one 8-GPU block cannot).
        (POD_GROUP + "---" + pod("bert-0").replace("koord-prod", "koord-nope"), "koord-nope"),
        (
            "---".join([POD_GROUP, pod("bert-0"), pod("bert-1").replace("prod", "batch")]),
            "different classes",
        ),
        (
            "---".join(
                [POD_GROUP.replace("minMember: 2", "minMember: 5")]
                + [pod(f"bert-{i}") for i in range(5)]
            ),
            "can never run",
        ),
    ],
    ids=[
        "alias",
        "not-a-job",
        "foreign-quota",
        "broken-yaml",
        "unknown-layer",
        "own-priority",
        "unknown-priority-class",
        "two-priority-classes",
        "never-fits",
    ],
)
def test_bad_yaml_is_400_and_writes_nothing(alice_api, world, text, word):
    response = yaml_post(alice_api, text)
    assert response.status_code == 400, response.content
    assert word.lower() in response.content.decode().lower()
    assert Job.objects.count() == 0 and Pod.objects.count() == 0


MANIFESTS = "/api/v1/manifests/"
NODE = """
apiVersion: v1
kind: Node
metadata:
  name: imported-1
  labels: {network.topology.nvidia.com/spine: s9, network.topology.nvidia.com/block: b9}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
"""


def test_admin_imports_and_exports(admin_api, world):
    response = admin_api.generic("POST", MANIFESTS, NODE.encode(), content_type="application/yaml")
    assert response.status_code == 201, response.content
    assert response.json()["counts"] == {"Node": 1}
    exported = admin_api.get(MANIFESTS)
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("application/yaml")
    assert "name: imported-1" in exported.content.decode()


def test_import_is_all_or_nothing(admin_api, world):
    broken = (
        NODE
        + "---\nkind: Node\napiVersion: v1\nmetadata: {name: bad}\n"
        + "status:\n  allocatable: {cpu: lots}\n"
    )
    response = admin_api.generic(
        "POST", MANIFESTS, broken.encode(), content_type="application/yaml"
    )
    assert response.status_code == 400 and "document 2" in response.json()["manifest"][0]
    assert not world.cluster.nodes.filter(name="imported-1").exists()


def test_tenants_cannot_import_or_export(alice_api, world):
    assert alice_api.get(MANIFESTS).status_code == 403
    response = alice_api.generic("POST", MANIFESTS, NODE.encode(), content_type="application/yaml")
    assert response.status_code == 403
    assert not world.cluster.nodes.filter(name="imported-1").exists()


def mixed_gang(min_member: int) -> str:
    """One 2-GPU pod and three 4-GPU pods gathered in one block of 8 GPUs."""
    group = POD_GROUP.replace("minMember: 2", f"minMember: {min_member}")
    pods = [pod("bert-0")] + [pod(f"bert-{i}", gpus=4) for i in (1, 2, 3)]
    return "---".join([group, *pods])


def test_a_job_of_two_shapes_is_refused_when_one_shape_alone_can_never_fit(alice_api, world):
    # All four needed: three 4-GPU pods in one 8-GPU block can never be.
    response = yaml_post(alice_api, mixed_gang(4))
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["topology"] == [
        "can never run: with every node empty, the roomiest block, b3, has room for 2 pods of "
        "4 GPUs, 4 cores, and the job needs 3 pods together in one block"
    ]
    assert not Job.objects.filter(name="bert").exists()


def test_a_job_of_two_shapes_is_refused_when_its_smallest_pods_overflow_every_block(
    alice_api, world
):
    # Three of four needed: the 4-GPU ones fit a block on their own, but any three pods ask for
    # at least 2 + 4 + 4 GPUs, and a block has 8.
    response = yaml_post(alice_api, mixed_gang(3))
    assert response.status_code == 400, response.content
    assert response.json()["topology"] == [
        "can never run: with every node empty, no block has the 10 GPUs, 12 cores that the "
        "job's smallest 3 pods need together"
    ]
    assert not Job.objects.filter(name="bert").exists()


def test_a_job_of_two_shapes_that_fits_by_shape_and_by_amount_is_taken(alice_api, world):
    # Two of four needed: a 2-GPU and a 4-GPU pod fit a block; whether they pack onto its nodes
    # is the rounds' to judge.
    response = yaml_post(alice_api, mixed_gang(2))
    assert response.status_code == 201, response.content
