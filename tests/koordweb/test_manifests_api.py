"""The two-step API later code calls: parse without a database, then apply into a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import transaction

from koordweb.manifests import (
    ManifestError,
    apply_manifests,
    import_manifests,
    load_documents,
    parse_manifests,
)
from koordweb.models import Cluster, Job, Pod

ALL_KINDS = Path(__file__).parent / "data" / "all_kinds.yaml"

SUBMISSION = """
apiVersion: v1
kind: Pod
metadata:
  name: train-2
  namespace: team-a
  labels:
    pod-group.scheduling.sigs.k8s.io: train
    quota.scheduling.koordinator.sh/name: team-a
spec:
  priorityClassName: koord-prod
  containers: [{name: w, image: t, resources: {requests: {cpu: "2", nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: eval-0
  namespace: team-a
  labels: {quota.scheduling.koordinator.sh/name: team-a}
  annotations:
    gang.scheduling.koordinator.sh/name: eval
    gang.scheduling.koordinator.sh/min-available: "1"
    gang.scheduling.koordinator.sh/network-topology-spec: >-
      {"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather","podCountMultiple":1}]}
spec:
  priorityClassName: koord-prod
  containers: [{name: w, image: t, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
"""


def test_parse_needs_no_database():
    manifests = parse_manifests(SUBMISSION)
    assert manifests.counts() == {"Job": 1, "Pod": 2}  # train-2 joins a stored PodGroup
    by_name = {plan.name: plan for plan in manifests.jobs}
    assert by_name["train"].existing and by_name["train"].kind == "podgroup"
    assert by_name["eval"].values["topology_spec"]["gatherStrategy"][0]["layer"] == "BlockLayer"
    assert manifests.of_kind("Pod")[1].values["requests"] == {"cpu": 500, "memory": 2**30}


@pytest.mark.django_db
def test_submission_uses_stored_nodes_quotas_classes_and_pod_groups():
    cluster = Cluster.objects.create(name="live")
    import_manifests(cluster, load_documents(ALL_KINDS.read_bytes()))
    with transaction.atomic():  # the caller's transaction, as the API holds one
        counts = apply_manifests(cluster, parse_manifests(SUBMISSION))
    assert counts == {"Job": 1, "Pod": 2}
    train = Job.objects.get(cluster=cluster, name="train")
    assert train.pods.count() == 3 and train.total_number == 3
    evaluation = Job.objects.get(cluster=cluster, name="eval")
    assert (evaluation.kind, evaluation.priority, evaluation.quota.name) == ("gang", 9000, "team-a")
    assert evaluation.priority_class.name == "koord-prod"
    assert Pod.objects.get(cluster=cluster, name="eval-0").priority == 9000


@pytest.mark.django_db
def test_submission_into_a_stored_pod_group_must_keep_its_quota():
    cluster = Cluster.objects.create(name="live")
    import_manifests(cluster, load_documents(ALL_KINDS.read_bytes()))
    wrong = SUBMISSION.split("---")[0].replace("name: team-a\nspec", "name: org\nspec")
    with pytest.raises(ManifestError, match="PodGroup team-a/train is not in quota 'org'"):
        apply_manifests(cluster, parse_manifests(wrong))
    assert Job.objects.get(cluster=cluster, name="train").pods.count() == 2


@pytest.mark.django_db
def test_same_names_in_another_cluster_are_fine():
    documents = load_documents(ALL_KINDS.read_bytes())
    import_manifests(Cluster.objects.create(name="one"), documents)
    counts = import_manifests(Cluster.objects.create(name="two"), documents)
    assert counts["Pod"] == 6 and Pod.objects.count() == 12
