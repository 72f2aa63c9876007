"""Bad manifests: exit code 2, one line naming the document and the field, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from koordweb.manifests import ManifestError, apply_manifests, parse_manifests
from koordweb.models import Cluster, ElasticQuota, Job, Node, Pod

REPO = Path(__file__).resolve().parents[2]

NODE = """
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {capacity: {cpu: "8", memory: 16Gi}}
"""


def pod(name: str = "p", extra_spec: str = "", requests: str = 'cpu: "1"', meta: str = "") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
{meta}
spec:
{extra_spec}
  containers:
  - name: c
    image: i
    resources:
      requests: {{{requests}}}
"""


def import_error(tmp_path: Path, *documents: str, cluster: str = "bad") -> str:
    """Import the documents; assert exit code 2, one line, and that nothing was written."""
    path = tmp_path / "bad.yaml"
    path.write_text("\n---\n".join(documents))
    nodes, pods, jobs = Node.objects.count(), Pod.objects.count(), Job.objects.count()
    clusters = Cluster.objects.count()
    with pytest.raises(CommandError) as caught:
        call_command("import_manifests", str(path), cluster=cluster, stdout=StringIO())
    assert caught.value.returncode == 2
    message = str(caught.value)
    assert "\n" not in message
    assert (Node.objects.count(), Pod.objects.count(), Job.objects.count()) == (nodes, pods, jobs)
    assert Cluster.objects.count() == clusters
    return message


@pytest.mark.django_db
def test_yaml_syntax_error_names_the_document(tmp_path):
    message = import_error(tmp_path, NODE, "kind: Pod\nmetadata: {name: [unclosed\n")
    assert "document 2: yaml:" in message


@pytest.mark.django_db
def test_a_misspelt_kind_is_an_error_naming_its_document(tmp_path):
    # A kind koordweb does not use (a Deployment) is skipped with a summary warning
    # (tests/koordweb/test_real_dumps.py); one close to a kind it reads is a typo, refused.
    message = import_error(tmp_path, NODE, "apiVersion: v1\nkind: Nod\nmetadata: {name: d}")
    assert "document 2: kind:" in message and "'Nod'" in message


@pytest.mark.django_db
def test_unknown_api_version(tmp_path):
    doc = (
        "apiVersion: scheduling.sigs.k8s.io/v1beta9\nkind: PodGroup\n"
        "metadata: {name: g}\nspec: {minMember: 1}"
    )
    message = import_error(tmp_path, doc)
    assert (
        "document 1: apiVersion: unsupported apiVersion 'scheduling.sigs.k8s.io/v1beta9'" in message
    )


@pytest.mark.django_db
def test_missing_required_field(tmp_path):
    doc = "apiVersion: v1\nkind: Node\nmetadata: {labels: {a: b}}"
    assert "document 2: metadata.name: is required" in import_error(tmp_path, NODE, doc)
    group = (
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {}"
    )
    assert "document 1: spec.minMember: is required" in import_error(tmp_path, group)


@pytest.mark.django_db
def test_bad_quantity(tmp_path):
    message = import_error(tmp_path, NODE, pod(requests="cpu: 1.5x"))
    assert "document 2: spec.containers[0].resources.requests.cpu:" in message
    assert "'1.5x'" in message


@pytest.mark.django_db
def test_negative_quantity(tmp_path):
    message = import_error(tmp_path, NODE, pod(requests="memory: -1Gi"))
    assert "spec.containers[0].resources.requests.memory: must not be negative" in message


@pytest.mark.django_db
def test_anchors_and_aliases_are_refused(tmp_path):
    doc = "apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: &l {a: b}, annotations: *l}"
    assert "document 1: yaml: anchors are not allowed" in import_error(tmp_path, doc)


@pytest.mark.django_db
def test_file_over_5_mb(tmp_path):
    padding = "# " + "x" * 1000 + "\n"
    message = import_error(tmp_path, NODE + padding * 5300)
    assert "size:" in message and "5242880" in message


@pytest.mark.django_db
def test_pod_on_unknown_node(tmp_path):
    message = import_error(tmp_path, NODE, pod(extra_spec="  nodeName: ghost"))
    assert "document 2: spec.nodeName: unknown node 'ghost'" in message


@pytest.mark.django_db
def test_quota_with_unknown_parent(tmp_path):
    quota = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: team
  labels: {quota.scheduling.koordinator.sh/parent: nowhere}
spec: {max: {cpu: "4"}}
"""
    message = import_error(tmp_path, NODE, quota)
    assert "document 2: metadata.labels.quota.scheduling.koordinator.sh/parent:" in message
    assert "'nowhere' is not defined" in message
    assert not ElasticQuota.objects.exists()


@pytest.mark.django_db
def test_duplicate_name_in_the_file(tmp_path):
    message = import_error(tmp_path, NODE, pod("a"), NODE)
    assert "document 3: metadata.name: duplicate Node 'node-a' (also document 1)" in message


@pytest.mark.django_db
def test_duplicate_of_a_stored_object(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(NODE)
    call_command("import_manifests", str(path), cluster="lab", stdout=StringIO())
    message = import_error(tmp_path, pod("new"), NODE, cluster="lab")
    assert "document 2: metadata.name: Node 'node-a' already exists in cluster 'lab'" in message
    assert not Pod.objects.filter(name="new").exists()


@pytest.mark.django_db
def test_unknown_priority_class(tmp_path):
    message = import_error(tmp_path, pod(extra_spec="  priorityClassName: gold"))
    assert "document 1: spec.priorityClassName: unknown PriorityClass 'gold'" in message


@pytest.mark.django_db
def test_topology_spec_naming_an_unknown_layer(tmp_path):
    meta = """  annotations:
    gang.scheduling.koordinator.sh/name: g
    gang.scheduling.koordinator.sh/min-available: "1"
    gang.scheduling.koordinator.sh/network-topology-spec: >-
      {"gatherStrategy":[{"layer":"RackLayer","strategy":"MustGather"}]}"""
    message = import_error(tmp_path, pod(meta=meta))
    assert "network-topology-spec: unknown topology layer 'RackLayer'" in message


@pytest.mark.django_db
def test_label_values_must_be_strings(tmp_path):
    doc = "apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: {version: 1.0}}"
    assert "document 1: metadata.labels: must map strings to strings" in import_error(tmp_path, doc)


@pytest.mark.django_db
def test_device_of_unknown_node_and_deep_nesting(tmp_path):
    device = (
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Device\n"
        "metadata: {name: ghost}\nspec: {devices: [{type: gpu, minor: 0}]}"
    )
    assert "document 1: metadata.name: unknown node 'ghost'" in import_error(tmp_path, device)
    deep = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: " + "[" * 40 + "]" * 40
    assert "document 1: yaml: nesting deeper than" in import_error(tmp_path, deep)


@pytest.mark.django_db
def test_pdb_with_both_bounds(tmp_path):
    doc = (
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\n"
        "spec: {minAvailable: 1, maxUnavailable: 1}"
    )
    assert "document 1: spec.maxUnavailable: set minAvailable or maxUnavailable" in import_error(
        tmp_path, doc
    )


@pytest.mark.django_db
def test_apply_inside_the_callers_transaction_rolls_back_alone():
    cluster = Cluster.objects.create(name="api")
    good = parse_manifests(NODE)
    bad = parse_manifests(pod(extra_spec="  nodeName: ghost"))
    with transaction.atomic():
        assert apply_manifests(cluster, good) == {"Node": 1}
        with pytest.raises(ManifestError) as caught:
            apply_manifests(cluster, bad)
        assert (caught.value.index, caught.value.field) == (1, "spec.nodeName")
        assert Node.objects.filter(cluster=cluster).count() == 1  # the outer work survives
    assert not Pod.objects.exists() and not Job.objects.exists()


def test_exit_code_is_2_from_the_command_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: &x {}}\n")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "koordweb.settings.test",
        "DATABASE_URL": f"sqlite:///{tmp_path}/unused.sqlite3",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "import_manifests", str(bad)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "document 1: yaml: anchors are not allowed" in result.stderr
    assert (
        not (tmp_path / "unused.sqlite3").exists()
        or (tmp_path / "unused.sqlite3").stat().st_size == 0
    )


QUOTA_TEMPLATE = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: {name}
  labels:
    quota.scheduling.koordinator.sh/parent: {parent}
    quota.scheduling.koordinator.sh/is-parent: "true"
spec: {{max: {{cpu: "4"}}}}
"""


@pytest.mark.django_db
def test_quota_parents_forming_a_cycle(tmp_path):
    message = import_error(
        tmp_path,
        QUOTA_TEMPLATE.format(name="a", parent="b"),
        QUOTA_TEMPLATE.format(name="b", parent="a"),
    )
    assert "document 1: metadata.labels.quota.scheduling.koordinator.sh/parent:" in message
    assert "form a cycle" in message


@pytest.mark.django_db
def test_pod_in_unknown_pod_group(tmp_path):
    # (A quota label naming no quota is Koordinator's default quota, with a warning:
    # test_koordinator_reading.py.)
    in_group = pod(meta="  labels: {pod-group.scheduling.sigs.k8s.io: nowhere}")
    assert "unknown PodGroup default/nowhere" in import_error(tmp_path, NODE, in_group)


@pytest.mark.django_db
def test_pods_of_one_gang_must_agree(tmp_path):
    def member(name: str, minimum: int) -> str:
        return pod(
            name,
            meta=f"""  annotations:
    gang.scheduling.koordinator.sh/name: g
    gang.scheduling.koordinator.sh/min-available: "{minimum}\"""",
        )

    message = import_error(tmp_path, member("a", 2), member("b", 3))
    assert (
        "document 2: metadata.annotations.gang.scheduling.koordinator.sh/min-available:" in message
    )
    assert "gang default/g has 2 (document 1), this pod says 3" in message


@pytest.mark.django_db
def test_running_pod_needs_a_node_and_a_known_phase(tmp_path):
    running = pod() + "status: {phase: Running}\n"
    assert "document 1: status.phase: a Running pod needs spec.nodeName" in import_error(
        tmp_path, running
    )
    odd = pod() + "status: {phase: Lost}\n"
    assert "document 1: status.phase: must be one of" in import_error(tmp_path, odd)


@pytest.mark.django_db
def test_bad_cluster_name_and_missing_file(tmp_path):
    with pytest.raises(CommandError) as caught:
        call_command("import_manifests", str(tmp_path / "x.yaml"), cluster="no spaces")
    assert caught.value.returncode == 2 and "--cluster:" in str(caught.value)
    with pytest.raises(CommandError) as caught:
        call_command("import_manifests", str(tmp_path / "missing.yaml"))
    assert caught.value.returncode == 2 and "missing.yaml: No such file" in str(caught.value)
    assert not Cluster.objects.exists()


@pytest.mark.django_db
def test_labels_and_tolerations_the_api_server_would_refuse(tmp_path):
    """Checked as kube-apiserver checks them (koordweb.kubenames), with the field named."""
    message = import_error(tmp_path, NODE, pod(meta="  labels: {'bad key!': x}"))
    assert "document 2: metadata.labels: the key 'bad key!' has a name that is not" in message
    selector = "  nodeSelector: {zone: 'a/b'}"
    message = import_error(tmp_path, NODE, pod(extra_spec=selector))
    assert "document 2: spec.nodeSelector: the value of 'zone' must be empty or" in message
    toleration = "  tolerations: [{key: gpu, operator: Exists, value: x}]"
    message = import_error(tmp_path, NODE, pod(extra_spec=toleration))
    assert "document 2: spec.tolerations[0].value: must be empty when the operator is" in message


@pytest.mark.django_db
def test_a_quota_name_must_fit_a_label_value(tmp_path):
    """Pods name their quota in a label, whose values have at most 63 characters."""
    name = "q" * 64
    quota = (
        f"apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\n"
        f"metadata: {{name: {name}, namespace: default}}\nspec: {{max: {{cpu: '8'}}}}"
    )
    message = import_error(tmp_path, quota)
    assert "document 1: metadata.name: must be lower-case letters" in message
    assert ElasticQuota.objects.filter(name=name).count() == 0
