"""The scheduler ConfigMap koord-scheduler-config <-> a cluster's scheduler_args: import, export,
the kubernetes backend's reconcile path, and one warning for what koordweb does not support."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from koordweb.backends.kube import KubeClusterClient
from koordweb.backends.kubernetes import KubernetesBackend
from koordweb.backends.reconcile import cluster_reconcile
from koordweb.engine.pipeline import round_execute
from koordweb.manifests import ManifestError, export_manifests, import_manifests
from koordweb.manifests.scheduler_config import read_scheduler_config
from koordweb.models import Cluster, Round
from tests.fakekube import FakeKube
from tests.fakekube.testing import seed_blocks
from tests.koordweb.kube_helpers import fast_retry

# Our own configuration in the shape of Koordinator's config/manager/scheduler-config.yaml.
KUBE_SCHEDULER_CONFIGURATION = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
profiles:
  - schedulerName: koord-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: NodeResourcesFitArgs
          scoringStrategy:
            type: LeastAllocated
      - name: LoadAwareScheduling
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: LoadAwareSchedulingArgs
          nodeMetricExpirationSeconds: 300
          resourceWeights: {cpu: 1, memory: 1}
          usageThresholds: {cpu: 75, memory: 90}
          estimatedScalingFactors: {cpu: 85, memory: 70}
          supportedResources: [nvidia.com/gpu]
      - name: DeviceShare
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: DeviceShareArgs
          scoringStrategy:
            type: MostAllocated
      - name: ElasticQuota
        args:
          quotaGroupNamespace: koordinator-system
"""


def config_map(**extra_data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "koord-scheduler-config", "namespace": "koordinator-system"},
        "data": {"koord-scheduler-config": KUBE_SCHEDULER_CONFIGURATION, **extra_data},
    }


EXPECTED_ARGS = {
    "LoadAware": {
        "nodeMetricExpirationSeconds": 300,
        "resourceWeights": {"cpu": 1, "memory": 1},
        "usageThresholds": {"cpu": 75, "memory": 90},
        "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    },
    "DeviceShare": {"scoring": "MostAllocated"},
}
UNSUPPORTED = [
    "NodeResourcesFit.scoringStrategy",
    "LoadAwareScheduling.supportedResources",
    "ElasticQuota.quotaGroupNamespace",
]


def test_supported_arguments_are_read_and_the_others_named() -> None:
    args, unsupported = read_scheduler_config(config_map()["data"])
    assert args == EXPECTED_ARGS
    assert unsupported == UNSUPPORTED


@pytest.mark.django_db
def test_import_sets_scheduler_args_and_warns_once(tmp_path: Path) -> None:
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(config_map()))
    out, err = StringIO(), StringIO()
    call_command("import_manifests", str(path), "--cluster", "c1", stdout=out, stderr=err)
    assert Cluster.objects.get(name="c1").scheduler_args == EXPECTED_ARGS
    warnings = [line for line in err.getvalue().splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert all(name in warnings[0] for name in UNSUPPORTED)


@pytest.mark.django_db
def test_an_exported_dump_reimports_with_the_same_scheduler_args() -> None:
    own = '{"NetworkTopology": {"bestFit": true}, "JobPreemption": {"candidateLimit": 4}}'
    source = Cluster.objects.create(name="src")
    import_manifests(source, [config_map(**{"koordweb-scheduler-args": own})])
    wanted = {**EXPECTED_ARGS, "NetworkTopology": {"bestFit": True}}
    wanted["JobPreemption"] = {"candidateLimit": 4}
    assert source.scheduler_args == wanted
    dump = export_manifests(source)
    (doc,) = [d for d in dump if d["kind"] == "ConfigMap"]
    assert doc["metadata"] == {"name": "koord-scheduler-config", "namespace": "koordinator-system"}
    config = yaml.safe_load(doc["data"]["koord-scheduler-config"])
    names = [entry["name"] for entry in config["profiles"][0]["pluginConfig"]]
    assert names == ["DeviceShare", "LoadAwareScheduling"]  # koord-scheduler's own plugins only
    copy = Cluster.objects.create(name="copy")
    import_manifests(copy, dump)
    assert copy.scheduler_args == source.scheduler_args
    assert export_manifests(copy) == dump


@pytest.mark.django_db
def test_a_bad_supported_argument_refuses_the_import() -> None:
    bad = config_map()
    bad["data"]["koord-scheduler-config"] = KUBE_SCHEDULER_CONFIGURATION.replace(
        "cpu: 75", "cpu: 175"
    )
    with pytest.raises(ManifestError, match=r"LoadAware.usageThresholds: cpu: expected at least"):
        import_manifests(Cluster.objects.create(name="bad"), [bad])


@pytest.mark.django_db
def test_the_kubernetes_backend_reconcile_reads_it_too() -> None:
    cluster = Cluster.objects.create(name="k8s", backend=Cluster.Backend.KUBERNETES)
    result = cluster_reconcile(cluster=cluster, documents=[config_map()], now=timezone.now())
    cluster.refresh_from_db()
    assert cluster.scheduler_args == EXPECTED_ARGS
    assert (
        len(result["warnings"]) == 1 and "ElasticQuota.quotaGroupNamespace" in result["warnings"][0]
    )


@pytest.mark.django_db(transaction=True)
def test_a_round_against_a_cluster_takes_the_configmap(kube: FakeKube) -> None:
    seed_blocks(kube)
    kube.add(config_map())
    cluster = Cluster.objects.create(name="k8s", backend=Cluster.Backend.KUBERNETES)
    retry = fast_retry(attempts=4)
    with (
        KubeClusterClient.from_url(
            kube.url, retry=retry, watch_timeout=1, sync_timeout=10, budget_attempts=3
        ) as client,
        transaction.atomic(),
    ):
        round_execute(
            cluster=cluster,
            backend=KubernetesBackend(client),
            trigger=Round.Trigger.MANUAL,
            now=timezone.now(),
        )
    cluster.refresh_from_db()
    assert cluster.scheduler_args == EXPECTED_ARGS
