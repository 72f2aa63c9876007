"""Never-fit detection on two spines of four blocks of 8 nodes x 8 GPUs (64 nodes)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError

from koordweb.engine.feasibility import ClusterRoom, job_feasibility_check
from koordweb.models import Cluster
from koordweb.services.jobs import GatherRule, JobSpec, PodShape
from tests.builders import ClusterFactory, PriorityClassFactory, QuotaFactory, gang, superpod

pytestmark = pytest.mark.django_db
GPU8 = {"nvidia.com/gpu": 8, "cpu": 8000}
BLOCK = {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]}


@pytest.fixture
def superpods(db: None) -> Cluster:
    cluster = ClusterFactory(name=settings.KOORDWEB_CLUSTER)
    nodes = superpod(cluster, spines=2, blocks=4, nodes=8)
    team = QuotaFactory(cluster=cluster, name="team")
    batch = PriorityClassFactory(cluster=cluster, name="koord-batch")
    gang(cluster, "running", quota=team, priority_class=batch, replicas=4, nodes=nodes[:4])
    return cluster


def spec(replicas: int, layer: str | None) -> JobSpec:
    gather = (GatherRule(layer, "MustGather"),) if layer else ()
    return JobSpec(name="j", pod=PodShape(requests=GPU8), replicas=replicas, gather=gather)


def test_a_block_holds_eight_such_pods_never_ten(superpods: Cluster) -> None:
    room = ClusterRoom(superpods)
    assert room.never_fits(GPU8, 8, BLOCK) == ""
    assert room.never_fits(GPU8, 10, BLOCK) == (
        "with every node empty, the roomiest block, b8, has room for 8 pods of 8 GPUs, 8 cores, "
        "and the job needs 10 pods together in one block"
    )
    assert room.what_would_fit(GPU8, 10, BLOCK) == (
        "It could run as at most 8 pods with this rule or with MustGather on a spine "
        "(room for 32 pods)."
    )


def test_the_error_names_the_field_to_change(superpods: Cluster) -> None:
    job_feasibility_check(superpods, spec(8, "BlockLayer"))
    with pytest.raises(ValidationError) as topology:
        job_feasibility_check(superpods, spec(10, "BlockLayer"))
    assert list(topology.value.message_dict) == ["topology"]
    with pytest.raises(ValidationError) as replicas:
        job_feasibility_check(superpods, spec(100, None))  # 64 nodes hold 64 such pods
    assert list(replicas.value.message_dict) == ["replicas"]
    assert "the whole cluster has room for 64 pods" in replicas.value.messages[0]


def test_unknown_layers_and_resources_are_left_to_their_own_checks(superpods: Cluster) -> None:
    room = ClusterRoom(superpods)
    unknown = {"gatherStrategy": [{"layer": "RackLayer", "strategy": "MustGather"}]}
    assert room.room(GPU8, unknown, empty=True) is None
    assert room.room({"example.com/fpga": 1}, None, empty=True) is None


def test_the_live_room_counts_what_running_pods_hold(superpods: Cluster) -> None:
    room = ClusterRoom(superpods)
    empty = room.room(GPU8, BLOCK, empty=True)
    live = room.room(GPU8, None, empty=False)
    assert empty is not None and live is not None
    assert empty.best == 8 and live.best < 64
    assert superpods.name == settings.KOORDWEB_CLUSTER
