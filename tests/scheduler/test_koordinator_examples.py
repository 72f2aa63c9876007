"""Every public example of koordinator.md: T8 topology, the 12-node case, three preemptions."""

from __future__ import annotations

from scheduler.apply import apply_round, run_rounds
from scheduler.round import plan_round
from tests.scheduler.builders import SPINE_BLOCK, cluster, gang, node, pod, t8

PODS = ["default/pod-1", "default/pod-2", "default/pod-3", "default/pod-4"]


def job(pods: int, cpu: float) -> gang:
    names = [f"pod-{i}" for i in range(1, pods + 1)]
    return gang("default/job", pods=pods).cpu(cpu).named(*names)


def where(result, keys):  # type: ignore[no-untyped-def]
    return [result.placements[k].node for k in keys]


def test_idle_prefer_gather_block_and_spine_takes_s1_in_block_order() -> None:
    snap = t8().submit(job(4, 16).prefer_gather("BlockLayer").prefer_gather("SpineLayer"))
    result = plan_round(snap.snapshot())
    assert where(result, PODS) == ["node-1", "node-8", "node-2", "node-7"]
    assert result.decisions["default/job"]["chosen_domain"] == "SpineLayer/s1"
    assert result.decisions["default/job"]["alternatives"] == {
        "SpineLayer/s1": 4,
        "SpineLayer/s2": 4,
    }


def test_must_gather_block_and_spine_means_block() -> None:
    snap = t8().submit(job(2, 16).must_gather("BlockLayer").must_gather("SpineLayer"))
    result = plan_round(snap.snapshot())
    assert where(result, PODS[:2]) == ["node-1", "node-8"]
    assert result.decisions["default/job"]["chosen_domain"] == "BlockLayer/b1"


def test_small_pods_prefer_gather_share_node_1() -> None:
    snap = t8().submit(job(2, 8).prefer_gather("BlockLayer").prefer_gather("SpineLayer"))
    result = plan_round(snap.snapshot())
    assert where(result, PODS[:2]) == ["node-1", "node-1"]


def twelve_nodes() -> cluster:
    layout = {
        ("spine-0", "block-0"): [0, 1, 2],
        ("spine-0", "block-1"): [3, 4],
        ("spine-1", "block-2"): [5, 6],
        ("spine-1", "block-3"): [7, 8],
        ("spine-2", "block-4"): [9, 10, 11],
    }
    c = cluster().topology(SPINE_BLOCK)
    for (spine, block), members in layout.items():
        for i in members:
            c.node(node(f"n{i}").cpu(8).spine(spine).block(block))
    return c


def test_twelve_nodes_no_block_fits_so_the_tightest_spine() -> None:
    snap = twelve_nodes().submit(job(4, 8).prefer_gather("BlockLayer").prefer_gather("SpineLayer"))
    result = plan_round(snap.snapshot())
    assert sorted(where(result, PODS)) == ["n5", "n6", "n7", "n8"]
    decision = result.decisions["default/job"]
    assert decision["chosen_domain"] == "SpineLayer/spine-1"
    assert decision["alternatives"] == {"SpineLayer/spine-1": 4, "SpineLayer/spine-0": 5}


def low(name: str, node_name: str, cpu: float = 16) -> pod:
    return pod(name).cpu(cpu).priority(1).on(node_name)


def test_preemption_evicts_only_node_1_and_nominates_spine_s1() -> None:
    snap = t8(low("low-1", "node-1"), low("low-4", "node-4")).submit(
        job(4, 16).must_gather("SpineLayer").priority(1000)
    )
    result = plan_round(snap.snapshot())
    verdict = result.unschedulable["default/job"]
    assert verdict.reason == (
        "no candidate topology nodes can accommodate job, desiredOfferSlot: 4, "
        "topology topologyNode SpineLayer/s1: 3; SpineLayer/s2: 3"
    )
    assert verdict.details["domain_offer_slots"] == {"SpineLayer/s1": 3, "SpineLayer/s2": 3}
    [record] = result.preemptions
    assert record.victim_pods == ("default/low-1",)
    assert [record.nominations[k] for k in PODS] == ["node-1", "node-8", "node-2", "node-7"]

    # next round: the victim is gone, the nominated nodes hold the job
    final, _ = run_rounds(apply_round(snap.snapshot(), result))
    nodes = {p.key: p.node for p in final.pods}
    assert [nodes[k] for k in PODS] == ["node-1", "node-8", "node-2", "node-7"]
    assert nodes["default/low-4"] == "node-4"


def test_preemption_on_two_big_nodes_takes_both_pods_of_one_node() -> None:
    c = cluster().node(node("node-a").cpu(32), node("node-b").cpu(32))
    c.running(low("low-a1", "node-a"), low("low-a2", "node-a"))
    c.running(low("low-b1", "node-b"), low("low-b2", "node-b"))
    result = plan_round(c.submit(job(2, 16).priority(1000)).snapshot())
    [record] = result.preemptions
    assert set(record.nominations.values()) == {"node-a"}
    assert record.victim_pods == ("default/low-a1", "default/low-a2")


def test_no_potential_victims_when_everyone_has_the_same_priority() -> None:
    running = [pod(f"peer-{i}").cpu(16).priority(1000).on(f"node-{i}") for i in range(1, 9)]
    snap = t8(*running).submit(job(4, 16).must_gather("SpineLayer").priority(1000))
    result = plan_round(snap.snapshot())
    assert result.preemptions == ()
    assert result.unschedulable["default/job"].details["preemption"]["reason"] == (
        "no potential victims"
    )
