"""The web asks the engine and gets the engine's answer: topology domains, offer slots, card counts.

Each scenario is one the web once answered differently from the engine: a block name reused under
two spines, a cordoned node, GPUs counted on a cluster that also has NPUs and MLUs. The engine's
answer here comes from the engine itself (the round's own Framework and CycleState on the same
snapshot a round reads), so the test does not trust the code it checks.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from koordweb.engine.assembly import build_for_round
from koordweb.engine.feasibility import ClusterRoom
from koordweb.engine.profile import engine_profile
from koordweb.manifests import topology_detail_status
from koordweb.models import Cluster, Node
from koordweb.selectors.topology import topology_tree
from koordweb.services.jobs import JobSpec, PodShape, job_spec_resolve
from scheduler.cycle import Framework
from scheduler.model import GangInfo, JobInfo, LayerGather, PodInfo, TopologyRule
from scheduler.round import plan_round
from scheduler.state import CycleState
from tests.builders import ClusterFactory, UserFactory, gpu_node, topology

pytestmark = pytest.mark.django_db
GPU8 = {"nvidia.com/gpu": 8}
BLOCK_RULE = {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]}


def _with_job(cluster: Cluster, requests: dict[str, int], count: int, rule: Any = None) -> Any:
    """The round's snapshot of `cluster` with one more pending gang of `count` such pods."""
    snapshot, _ = build_for_round(cluster, now=timezone.now())
    pods = tuple(
        PodInfo("truth", f"p-{i}", "truth/job", requests=requests, gang_id="truth/job")
        for i in range(count)
    )
    gang = GangInfo(id="truth/job", min_available=count, total=count)
    job = JobInfo(id="truth/job", pod_keys=tuple(p.key for p in pods), gangs=(gang,), topology=rule)
    return replace(snapshot, pods=(*snapshot.pods, *pods), jobs=(*snapshot.jobs, job)), job, pods


def engine_slots(cluster: Cluster, requests: dict[str, int], count: int = 16) -> dict[str, int]:
    """Per node, how many such pods the engine's filters let there, on the live state."""
    snapshot, job, pods = _with_job(cluster, requests, count)
    framework = Framework(engine_profile(cluster))
    state = CycleState(snapshot)
    framework.start(state)
    slots = framework.offer_slots(state, job, pods)
    return dict(zip(state.node_names, (int(s) for s in slots), strict=True))


def engine_places(cluster: Cluster, requests: dict[str, int], count: int, rule: Any) -> bool:
    snapshot, job, _ = _with_job(cluster, requests, count, rule)
    return job.id not in plan_round(snapshot, engine_profile(cluster)).unschedulable


def engine_domains(cluster: Cluster, level: int) -> list[str]:
    snapshot, _ = build_for_round(cluster, now=timezone.now())
    return list(CycleState(snapshot).topology.domain_labels(level))


@pytest.fixture
def shared_block() -> Cluster:
    """Block b0 under spine s0 (node a) and another block b0 under spine s1 (node b)."""
    cluster = ClusterFactory(name="shared")
    topology(cluster)
    gpu_node(cluster, "a", spine="s0", block="b0")
    gpu_node(cluster, "b", spine="s1", block="b0")
    gpu_node(cluster, "c", spine="s1", block="b1")
    return cluster


def test_a_block_name_under_two_spines_is_two_blocks_everywhere(shared_block: Cluster) -> None:
    blocks = engine_domains(shared_block, 2)
    assert blocks == ["BlockLayer/s0/b0", "BlockLayer/s1/b0", "BlockLayer/b1"]
    # the engine: two pods of 8 GPUs never share one block here
    must_block = TopologyRule(gather=(LayerGather("BlockLayer", "MustGather"),))
    assert not engine_places(shared_block, GPU8, 2, must_block)
    assert engine_places(shared_block, GPU8, 1, must_block)
    # the topology page: the same blocks, each with room for one such pod
    tree = topology_tree(shared_block, shape=GPU8)
    page_blocks = {k: d for k, d in tree.domains.items() if d.layer == "BlockLayer"}
    assert sorted(page_blocks) == sorted(blocks)
    assert {k: d.slots for k, d in page_blocks.items()} == dict.fromkeys(blocks, 1)
    assert page_blocks["BlockLayer/s1/b0"].parent == "SpineLayer/s1"
    # feasibility: three blocks of room 1, so two such pods together can never run
    room = ClusterRoom(shared_block).room(GPU8, BLOCK_RULE, empty=True)
    assert room is not None and (room.best, room.domains) == (1, 3)
    assert "has room for 1 pod" in ClusterRoom(shared_block).never_fits(GPU8, 2, BLOCK_RULE)
    # the exported status: one entry per block, each under its own spine
    status = topology_detail_status(shared_block)
    b0 = [
        e
        for e in status
        if e["topologyInfo"] == {"topologyLayer": "BlockLayer", "topologyName": "b0"}
    ]
    assert sorted(e["parentTopologyInfo"]["topologyName"] for e in b0) == ["s0", "s1"]
    assert [e["nodeNum"] for e in b0] == [1, 1]


@pytest.fixture
def cordoned() -> Cluster:
    """Two 8-GPU nodes in two blocks of one spine; node b is cordoned."""
    cluster = ClusterFactory(name="cordoned")
    topology(cluster)
    gpu_node(cluster, "a", spine="s0", block="b0")
    gpu_node(cluster, "b", spine="s0", block="b1")
    Node.objects.filter(cluster=cluster, name="b").update(unschedulable=True)
    return cluster


def test_a_cordoned_node_offers_no_slots_anywhere(cordoned: Cluster) -> None:
    assert engine_slots(cordoned, GPU8) == {"a": 1, "b": 0}
    tree = topology_tree(cordoned, shape=GPU8)
    assert tree.domains[_root(tree)].slots == 1
    assert tree.domains["BlockLayer/b1"].slots == 0
    assert tree.domains["NodeTopologyLayer/b"].slots == 0
    room = ClusterRoom(cordoned)
    live = room.room(GPU8, None, empty=False)
    assert live is not None and live.best == 1
    assert room.slots(GPU8, empty=False).tolist() == [1, 0]  # nodes a, b: the engine's count
    assert room.slots(GPU8, empty=True).tolist() == [1, 0]  # a cordon holds on an empty cluster


def _root(tree: Any) -> str:
    return next(k for k, d in tree.domains.items() if d.layer == "ClusterTopologyLayer")


@pytest.fixture
def three_vendors() -> Cluster:
    """A GPU node whose cards only its Device CR lists (4 H100s, one unhealthy), an Ascend node
    with 8 NPUs and a Cambricon node with 8 MLUs."""
    cluster = ClusterFactory(name="vendors")
    gpu = gpu_node(cluster, "gpu", block="b0", cards=4, unhealthy=(3,))
    gpu.allocatable = {k: v for k, v in gpu.allocatable.items() if k != "nvidia.com/gpu"}
    gpu.save(update_fields=["allocatable"])
    gpu_node(
        cluster, "npu", block="b0", vendor="huawei", model="Ascend-910B3", resource="huawei.com/npu"
    )
    gpu_node(
        cluster, "mlu", block="b0", vendor="cambricon", model="MLU370", resource="cambricon.com/mlu"
    )
    return cluster


def test_gpus_are_counted_by_the_engines_rule_beside_npus_and_mlus(three_vendors: Cluster) -> None:
    assert engine_slots(three_vendors, {"nvidia.com/gpu": 3}) == {"gpu": 1, "mlu": 0, "npu": 0}
    assert engine_slots(three_vendors, {"nvidia.com/gpu": 4}) == {"gpu": 0, "mlu": 0, "npu": 0}
    assert engine_slots(three_vendors, {"huawei.com/npu": 8}) == {"gpu": 0, "mlu": 0, "npu": 1}
    # the topology page: 3 GPUs, 8 NPUs, 8 MLUs in the whole cluster
    tree = topology_tree(three_vendors, shape={"nvidia.com/gpu": 3})
    root = tree.domains[_root(tree)]
    assert root.slots == 1
    cards = {
        r: root.capacity.get(r) for r in ("nvidia.com/gpu", "huawei.com/npu", "cambricon.com/mlu")
    }
    assert cards == {"nvidia.com/gpu": 3, "huawei.com/npu": 8, "cambricon.com/mlu": 8}
    # feasibility: no node holds a pod of 4 GPUs, even empty
    room = ClusterRoom(three_vendors)
    empty = room.room({"nvidia.com/gpu": 4}, None, empty=True)
    assert empty is not None and empty.best == 0
    assert room.slots({"nvidia.com/gpu": 3}, empty=True).tolist() == [1, 0, 0]  # gpu, mlu, npu
    # submission: a pod of 4 GPUs is refused, naming the largest node's 3
    admin = UserFactory(is_staff=True)
    spec = JobSpec(name="four", cluster="vendors", pod=PodShape(requests={"nvidia.com/gpu": 4}))
    with pytest.raises(ValidationError) as refused:
        job_spec_resolve(user=admin, spec=spec)
    assert "the largest offers 3" in " ".join(refused.value.message_dict["pod"])
    fits = JobSpec(name="three", cluster="vendors", pod=PodShape(requests={"nvidia.com/gpu": 3}))
    job_spec_resolve(user=admin, spec=fits)
