"""The user's pods are the user's (issue #33, item 3): a gang a kubelet refused is created again
from the pods' full manifests, never as pause placeholders, and a pod another controller owns is
left to its controller, whose replacement joins the job."""

from __future__ import annotations

import copy

from django.utils import timezone

from koordweb.engine.pipeline import round_execute
from koordweb.models import Job, Pod, Round
from tests.fakekube.testing import gang_pods
from tests.koordweb.kube_helpers import running_pod, settle
from tests.koordweb.test_kube_preemption import IntruderBeforeBinding, kube_round, nodes_of

# What the API server sets on a pod it stores (defaults) or a binding sets later.
SERVER_SPEC = {"nodeName", "terminationGracePeriodSeconds"}


def training_pods(name: str, owner: dict | None = None) -> list[dict]:
    pods = gang_pods(name, 2, 500)
    for pod in pods:
        container = pod["spec"]["containers"][0]
        container.update(
            image="ghcr.io/example/trainer:1.4",
            command=["torchrun", "--nproc-per-node=8", "train.py"],
            env=[{"name": "EPOCHS", "value": "90"}, {"name": "LR", "value": "0.1"}],
        )
        pod["spec"]["restartPolicy"] = "Never"
        pod["metadata"]["labels"] = {"app": "trainer"}
        if owner:
            pod["metadata"]["ownerReferences"] = [owner]
    return pods


def refuse_once(kube, cluster_client, kube_cluster) -> None:
    """Bind the gang with something outside koordweb taking node-3 meanwhile: its kubelet
    refuses the member bound there."""
    kube.add(running_pod("busy", "node-1", 1))  # the gang goes to block b2 (node-3, node-4)
    settle(kube, cluster_client)
    round_execute(
        cluster=kube_cluster,
        backend=IntruderBeforeBinding(cluster_client, kube, "node-3"),
        trigger=Round.Trigger.MANUAL,
        now=timezone.now(),
    )


def test_a_refused_gang_is_created_again_exactly_as_it_was(kube, cluster_client, kube_cluster):
    for pod in training_pods("train"):
        kube.add(pod)
    originals = {}
    settle(kube, cluster_client)
    for name in ("train-0", "train-1"):
        originals[name] = copy.deepcopy(kube.pod("ml", name))
    refuse_once(kube, cluster_client, kube_cluster)
    job = None
    for _ in range(8):
        kube_round(kube_cluster, cluster_client, kube)
        job = Job.objects.get(name="train")
        placed = None not in nodes_of(kube, ["train-0", "train-1"])
        renewed = all(
            (kube.pod("ml", n) or {}).get("metadata", {}).get("uid") != o["metadata"]["uid"]
            for n, o in originals.items()
        )
        if job.admission_rejections and placed and renewed:
            break
    assert job is not None and job.admission_rejections == 1
    for name, original in originals.items():
        again = kube.pod("ml", name)
        assert again["metadata"]["uid"] != original["metadata"]["uid"]  # a new pod
        before = {k: v for k, v in original["spec"].items() if k not in SERVER_SPEC}
        after = {k: v for k, v in again["spec"].items() if k not in SERVER_SPEC}
        assert set(after) == set(before)
        for field in before:  # field by field: image, command, env, restartPolicy...
            assert after[field] == before[field], field
        assert again["metadata"]["labels"] == original["metadata"]["labels"]
        for key, value in original["metadata"]["annotations"].items():
            assert again["metadata"]["annotations"][key] == value
        container = again["spec"]["containers"][0]
        assert container["image"] == "ghcr.io/example/trainer:1.4"  # never the pause image


def test_a_pod_another_controller_owns_is_left_to_it_and_its_replacement_adopted(
    kube, cluster_client, kube_cluster
):
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "uid": "0b5a4b1e-0000-4000-8000-000000000001",
        "controller": True,
    }
    for pod in training_pods("train", owner):
        kube.add(pod)
    refuse_once(kube, cluster_client, kube_cluster)
    kube_round(kube_cluster, cluster_client, kube)  # the refusal is seen: the gang is deleted
    settle(kube, cluster_client)
    # The controller replaces its pods under new names (a batch Job's random suffixes).
    assert kube.pod("ml", "train-0") is None or kube.pod("ml", "train-0")["metadata"].get(
        "deletionTimestamp"
    )
    for _ in range(3):
        kube_round(kube_cluster, cluster_client, kube)
    for index, pod in enumerate(training_pods("train", owner)):
        pod["metadata"]["name"] = f"train-x{index}"
        kube.add(pod)
    for _ in range(5):
        kube_round(kube_cluster, cluster_client, kube)
        if None not in nodes_of(kube, ["train-x0", "train-x1"]):
            break
    assert None not in nodes_of(kube, ["train-x0", "train-x1"])
    # koordweb never created a pod of its own in the controller's place.
    created = [r for r in kube.faults.requests_to(r"/namespaces/ml/pods$", "POST")]
    assert created == []
    names = set(Job.objects.get(name="train").pods.values_list("name", flat=True))
    assert {"train-x0", "train-x1"} <= names
    assert not Pod.objects.filter(name__in=["train-0", "train-1"], uid="").exists()
