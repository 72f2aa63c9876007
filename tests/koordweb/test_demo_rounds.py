"""The demo (`make run`) through many rounds: its arrivals never over-commit a node, and its
Ascend and Cambricon jobs get their cards."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from koordweb.models import Cluster, JobState, Pod, PodPhase
from koordweb.services.demo import demo_seed
from koordweb.services.demo_arrivals import ARRIVALS, demo_arrival
from tests.builders import simulated_round


@pytest.fixture
def demo(db, settings, tmp_path):
    settings.KOORDWEB_CLUSTER = "default"
    settings.VAR_DIR = tmp_path  # demo_seed writes its credentials file there
    demo_seed()
    return Cluster.objects.get(name="default")


def test_no_node_holds_more_gpus_than_it_has_after_many_rounds(demo):
    now = timezone.now()
    for step in range(12):
        demo_arrival(cluster=demo)
        simulated_round(demo, now + timedelta(seconds=30 * step))
    for node in demo.nodes.all():
        used = sum(
            p.requests.get("nvidia.com/gpu", 0)
            for p in Pod.objects.filter(node=node, phase__in=[PodPhase.PENDING, PodPhase.RUNNING])
        )
        assert used <= node.allocatable.get("nvidia.com/gpu", 0)


def test_demo_ascend_and_cambricon_jobs_get_their_cards_end_to_end(demo):
    wanted = {"ascend-vnpu-infer", "ascend-train", "mlu-smlu-serve"}
    now = timezone.now()
    for step in range(len(ARRIVALS)):
        demo_arrival(cluster=demo, limit_active=1000)
        simulated_round(demo, now + timedelta(seconds=step))
    jobs = [j for j in demo.jobs.all() if any(j.name.startswith(f"demo-{w}") for w in wanted)]
    assert {j.name.split("-", 1)[1].rsplit("-", 1)[0] for j in jobs} == wanted
    for job in jobs:
        job.refresh_from_db()
        assert job.state in (JobState.SCHEDULED, JobState.RUNNING), (job, job.decisions.first())
        for pod in job.pods.all():
            vendor = pod.node.labels["node.koordinator.sh/gpu-vendor"]
            allocated = pod.annotations["scheduling.koordinator.sh/device-allocated"]
            assert '"gpu"' in allocated
            if "vnpu" in job.name:
                assert vendor == "huawei"
                assert pod.annotations["huawei.com/npu-core"].endswith("-vir10_4c_16g_m")
            elif "ascend" in job.name:
                assert vendor == "huawei"
                assert len(pod.annotations["huawei.com/npu-core"].split(",")) == 4
            else:
                assert vendor == "cambricon"
                _minor, vcore, blocks = pod.annotations["CAMBRICON_DSMLU_PROFILE"].split("_")
                assert (vcore, blocks) == ("50", str(8 * 4))
                assert pod.annotations["CAMBRICON_DSMLU_ASSIGHED"] == "false"
