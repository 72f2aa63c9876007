"""The demo cluster: idempotent seeding, logins that work, and a lossless export/import."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from koordweb.models import Cluster, Device, Job, Node, Pod
from koordweb.services.demo import credentials_path, demo_seed


@pytest.fixture
def seeded(db, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.KOORDWEB_CLUSTER = "default"
    return demo_seed()


def test_the_demo_has_the_promised_shape(seeded):
    cluster = Cluster.objects.get(name="default")
    h800 = [n for n in cluster.nodes.all() if n.labels["node.koordinator.sh/gpu-model"] == "H800"]
    assert len(h800) == 2 * 4 * 8
    assert {n.labels["network.topology.nvidia.com/spine"] for n in h800} == {"s1", "s2"}
    assert len({n.labels["network.topology.nvidia.com/block"] for n in h800}) == 8
    vendors = {n.labels["node.koordinator.sh/gpu-vendor"] for n in cluster.nodes.all()}
    assert vendors == {"nvidia", "huawei", "cambricon"}
    node = h800[0]
    assert Device.objects.filter(node=node, device_type="gpu").count() == 8
    assert Device.objects.filter(node=node, device_type="rdma").count() == 4
    assert {q.name for q in cluster.quotas.all()} >= {"root", "team-vision", "team-nlp"}
    assert {pc.name for pc in cluster.priority_classes.all()} >= {"koord-prod", "koord-batch"}
    states = set(cluster.jobs.values_list("state", flat=True))
    assert {"Running", "Pending"} <= states


def test_seeding_twice_changes_nothing(seeded, client):
    before = (
        Node.objects.count(),
        Device.objects.count(),
        Job.objects.count(),
        Pod.objects.count(),
    )
    assert demo_seed() == seeded
    after = (Node.objects.count(), Device.objects.count(), Job.objects.count(), Pod.objects.count())
    assert before == after


def test_printed_credentials_log_in(seeded, client):
    out = StringIO()
    call_command("demo_credentials", stdout=out)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("log in as admin")]
    _, _, _, user, _, password, *_ = lines[0].split()
    assert client.login(username=user, password=password)
    assert credentials_path().stat().st_mode & 0o077 == 0


def test_demo_export_imports_into_an_empty_database_and_exports_identically(seeded, tmp_path: Path):
    first = tmp_path / "demo.yaml"
    call_command("export_manifests", "-o", str(first), "--cluster", "default")
    Job.objects.all().delete()
    Cluster.objects.all().delete()
    call_command("import_manifests", str(first), "--cluster", "default", stdout=StringIO())
    second = tmp_path / "again.yaml"
    call_command("export_manifests", "-o", str(second), "--cluster", "default")
    assert first.read_text() == second.read_text()
    assert Node.objects.count() == 72
