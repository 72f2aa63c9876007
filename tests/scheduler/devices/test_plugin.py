"""The DeviceShare plugin inside whole rounds: device-aware offer slots, placements, annotations."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from scheduler.causes import INSUFFICIENT
from scheduler.cycle import Framework
from scheduler.devices import AllocatedDevice, NodeDevices, render_device_allocated
from scheduler.devices.fleet import CardCheck
from scheduler.devices.names import (
    ANNOTATION_DEVICE_ALLOCATED,
    ANNOTATION_JOINT_ALLOCATE,
    LABEL_GPU_MODEL,
    LABEL_PARTITION_POLICY,
)
from scheduler.framework import Plan, Refusal
from scheduler.model import NodeInfo, PodInfo
from scheduler.plugins.devices import DeviceShare, DeviceState
from scheduler.profile import Profile
from scheduler.round import plan_round
from scheduler.state import CycleState
from scheduler.templates import template_key
from tests.scheduler.builders import cluster, gang, node, pod
from tests.scheduler.devices.builders import JOINT, GiB, gpu_node

PROFILE = Profile.default().with_args("DeviceShare")


def with_annotations(pods: list[PodInfo], annotations: dict[str, str]) -> list[PodInfo]:
    return [replace(p, annotations={**p.annotations, **annotations}) for p in pods]


def snapshot_of(
    nodes: list[NodeInfo], *jobs: gang, running: list[PodInfo] = (), joint: bool = False
):  # type: ignore[no-untyped-def,assignment]
    c = cluster()
    c.nodes.extend(nodes)
    c.pods.extend(running)
    for g in jobs:
        job, pods = g.build()
        c.jobs.append(job)
        c.pods.extend(with_annotations(pods, JOINT) if joint else pods)
    return c.snapshot()


def busy(node_name: str, minors: list[int], name: str = "busy") -> PodInfo:
    held = [AllocatedDevice("gpu", m, 100, 80 * GiB, 100) for m in minors]
    return replace(
        pod(name).gpu(len(minors)).on(node_name).build(),
        annotations={ANNOTATION_DEVICE_ALLOCATED: render_device_allocated(held)},
    )


def test_joint_gang_gets_numa_halves_and_their_nics() -> None:
    job = gang("default/train", pods=2).cpu(4).gpu(4).request("koordinator.sh/rdma", 1)
    result = plan_round(snapshot_of([gpu_node("gpu-1")], job, joint=True), PROFILE)
    placed = [result.placements[f"default/train-{i}"] for i in (1, 2)]
    gpus = [[d["minor"] for d in p.devices["gpu"]] for p in placed]
    nics = [[d["minor"] for d in p.devices["rdma"]] for p in placed]
    assert gpus == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert nics == [[1, 2], [3, 4]]
    annotation = json.loads(placed[0].annotations[ANNOTATION_DEVICE_ALLOCATED])
    assert annotation["rdma"][0]["extension"]["vfs"] == [{"minor": 0, "busID": "0000:01:00.1"}]


def test_offer_slots_follow_the_partition_table_not_the_gpu_count() -> None:
    # Both nodes have four free GPUs by count; on hopper-a the free ones form no NVLink pair.
    honor = {LABEL_GPU_MODEL: "H100", LABEL_PARTITION_POLICY: "Honor"}
    nodes = [gpu_node("hopper-a", honor), gpu_node("hopper-b", honor)]
    running = [busy("hopper-a", [0, 2, 4, 6], "a"), busy("hopper-b", [0, 1, 2, 3], "b")]
    job = gang("default/pairs", pods=2).cpu(1).gpu(2)
    result = plan_round(snapshot_of(nodes, job, running=running), PROFILE)
    placed = [result.placements[f"default/pairs-{i}"] for i in (1, 2)]
    assert [p.node for p in placed] == ["hopper-b", "hopper-b"]
    assert [[d["minor"] for d in p.devices["gpu"]] for p in placed] == [[4, 5], [6, 7]]


def test_a_gang_that_needs_more_cards_than_fit_is_not_placed_at_all() -> None:
    nodes = [gpu_node("gpu-1")]
    running = [busy("gpu-1", [0, 1, 2, 3, 4])]
    job = gang("default/big", pods=2).cpu(1).gpu(2)
    result = plan_round(snapshot_of(nodes, job, running=running), PROFILE)
    assert "default/big-1" not in result.placements
    assert "default/big" in result.unschedulable


def test_invalid_request_is_reported_at_prefilter() -> None:
    job = gang("default/bad", pods=1).request("koordinator.sh/gpu-core", 50)
    result = plan_round(snapshot_of([gpu_node("gpu-1")], job), PROFILE)
    verdict = result.unschedulable["default/bad"]
    assert verdict.code == "Invalid"
    assert "invalid resource device requests: [koordinator.sh/gpu-core]" in verdict.reason


def state_for(
    nodes: list[NodeInfo], *jobs: gang, running: list[PodInfo] = ()
) -> tuple[CycleState, DeviceShare]:  # type: ignore[assignment]
    state = CycleState(snapshot_of(nodes, *jobs, running=running))
    plugin = Framework(PROFILE).plugin(DeviceShare.name)
    assert isinstance(plugin, DeviceShare)
    plugin.setup(state)
    return state, plugin


def test_pods_without_devices_cost_nothing() -> None:
    state, plugin = state_for([gpu_node("gpu-1")], gang("default/cpu", pods=3).cpu(1))
    job = state.jobs["default/cpu"]
    everywhere = np.arange(len(state.nodes), dtype=np.int64)
    assert plugin.slot_limits(state, job, state.pending_pods(job), everywhere) is None


def test_identical_nodes_share_one_count_and_nodes_without_devices_are_not_constrained() -> None:
    nodes = [gpu_node(f"gpu-{i:02d}") for i in range(40)] + [node("cpu-1").cpu(64).build()]
    state, plugin = state_for(nodes, gang("default/train", pods=3).cpu(1).gpu(3))
    job = state.jobs["default/train"]
    everywhere = np.arange(len(state.nodes), dtype=np.int64)
    slots = plugin.slot_limits(state, job, state.pending_pods(job), everywhere)
    assert slots is not None
    # "cpu-1" sorts first and is left to the resource filter; 8 cards hold two 3-card pods.
    assert slots.tolist() == [3] + [2] * 40
    ds = state.get_or_create(plugin.key)
    assert isinstance(ds, DeviceState)
    assert len(set(ds.fleet.group.tolist()) - {-1}) == 1  # one group: every idle 8-GPU node


def test_preemption_dry_run_sees_the_victims_cards_free() -> None:
    running = [busy("gpu-1", list(range(8)), "victim")]
    state, plugin = state_for(
        [gpu_node("gpu-1")], gang("default/train", pods=1).gpu(8), running=running
    )
    job = state.jobs["default/train"]
    pods = state.pending_pods(job)
    everywhere = np.arange(1, dtype=np.int64)
    assert plugin.slot_limits(state, job, pods, everywhere).tolist() == [0]  # type: ignore[union-attr]
    released = np.zeros_like(state.used)
    gone = np.array([key == "default/victim" for key in state.bound_keys])
    with state.releasing(released, gone):
        assert plugin.slot_limits(state, job, pods, everywhere).tolist() == [1]  # type: ignore[union-attr]
    assert plugin.slot_limits(state, job, pods, everywhere).tolist() == [0]  # type: ignore[union-attr]


def test_dry_runs_remember_per_node_but_answer_each_released_set() -> None:
    running = [busy("gpu-1", [0, 1, 2, 3], "low"), busy("gpu-1", [4, 5], "high")]
    state, plugin = state_for(
        [gpu_node("gpu-1")], gang("default/train", pods=4).gpu(2), running=running
    )
    job = state.jobs["default/train"]
    pods = state.pending_pods(job)
    everywhere = np.arange(1, dtype=np.int64)
    released = np.zeros_like(state.used)

    def slots_without(*names: str) -> int:
        gone = np.array([key.split("/")[1] in names for key in state.bound_keys])
        with state.releasing(released, gone):
            return int(plugin.slot_limits(state, job, pods, everywhere)[0])  # type: ignore[index]

    # Asked again and in another order, each released set keeps its own answer.
    assert [slots_without("low"), slots_without("low", "high"), slots_without("low")] == [3, 4, 3]
    assert slots_without() == 1
    # A placement on the node changes its usage: the remembered counts are not reused.
    assert plugin.reserve(state, job, Plan({"default/train-1": 0})).status.ok
    assert [slots_without("low"), slots_without("low", "high"), slots_without()] == [2, 3, 0]


def test_a_dry_run_over_some_nodes_counts_as_over_every_node() -> None:
    # The offer-slot memo asks a dry run again only on the nodes that moved, in any order.
    nodes = [gpu_node(f"gpu-{i}") for i in range(6)]
    running = [busy(f"gpu-{i}", list(range(2 * (i % 4))), f"low-{i}") for i in range(1, 6)]
    running += [busy("gpu-5", [6, 7], "more")]
    state, plugin = state_for(nodes, gang("default/train", pods=3).gpu(4), running=running)
    job = state.jobs["default/train"]
    pods = state.pending_pods(job)
    everywhere = np.arange(len(nodes), dtype=np.int64)
    released = np.zeros_like(state.used)
    for gone_names in ({"low-1", "low-3"}, {"low-3", "more"}, set(), {"low-2", "low-5", "more"}):
        gone = np.array([key.split("/")[1] in gone_names for key in state.bound_keys])
        with state.releasing(released, gone):
            full = plugin.slot_limits(state, job, pods, everywhere)
            assert full is not None
            for some in ([5, 1], [3], [0, 2, 4], [4, 3, 2, 1, 0, 5]):
                part = plugin.slot_limits(state, job, pods, np.array(some, dtype=np.int64))
                assert part is not None and part.tolist() == full[some].tolist()


def test_one_dry_run_release_still_sees_a_node_whose_cards_moved() -> None:
    # The fleet keeps a node's usage with a release's pods gone per release array; a node whose
    # cards move meanwhile (here: a reservation) is read again.
    running = [busy("gpu-1", [0, 1, 2, 3], "low")]
    state, plugin = state_for(
        [gpu_node("gpu-1")], gang("default/train", pods=4).gpu(2), running=running
    )
    job = state.jobs["default/train"]
    pods = state.pending_pods(job)
    everywhere = np.arange(1, dtype=np.int64)
    released = np.zeros_like(state.used)
    gone = np.array([key == "default/low" for key in state.bound_keys])

    def dry_slots() -> int:
        with state.releasing(released, gone):
            return int(plugin.slot_limits(state, job, pods, everywhere)[0])  # type: ignore[index]

    assert dry_slots() == 4
    assert plugin.reserve(state, job, Plan({"default/train-1": 0})).status.ok
    assert dry_slots() == 3


def test_a_renamed_node_is_the_node_built_under_that_name() -> None:
    built = gpu_node("gpu-1").devices
    assert isinstance(built, NodeDevices)
    renamed = built.renamed("gpu-2")
    assert renamed == replace(built, node="gpu-2") == gpu_node("gpu-2").devices
    assert (renamed.node, built.node) == ("gpu-2", "gpu-1")
    assert renamed.gpu_index == built.gpu_index and renamed.rdma_index == built.rdma_index


def test_reserve_then_unreserve_gives_the_cards_back() -> None:
    state, plugin = state_for([gpu_node("gpu-1")], gang("default/train", pods=2).gpu(4))
    job = state.jobs["default/train"]
    plan = Plan({"default/train-1": 0, "default/train-2": 0})
    reserved = plugin.reserve(state, job, plan)
    assert reserved.status.ok
    ds = state.get_or_create(plugin.key)
    assert ds.fleet.usage[0].core == [100] * 8
    assert plugin.reserve(state, state.jobs["default/train"], plan).status.ok is False
    plugin.unreserve(state, job, plan)
    assert ds.fleet.usage[0].core == [0] * 8


def test_bound_pod_without_annotation_still_holds_cards() -> None:
    running = [pod("legacy").gpu(6).on("gpu-1").build()]
    state, plugin = state_for(
        [gpu_node("gpu-1")], gang("default/train", pods=1).gpu(4), running=running
    )
    job = state.jobs["default/train"]
    slots = plugin.slot_limits(state, job, state.pending_pods(job), np.arange(1, dtype=np.int64))
    assert slots is not None and slots.tolist() == [0]
    assert plugin.explain(state, job, state.pending_pods(job), np.arange(1, dtype=np.int64)) == {
        Refusal(INSUFFICIENT, "Insufficient gpu", "gpu"): 1
    }
    assert ANNOTATION_JOINT_ALLOCATE not in state.pods["default/train-1"].annotations


def test_gpu_pods_on_nodes_without_a_device_cr_are_left_to_resource_fit() -> None:
    plain = node("plain").cpu(8).gpus(2).build()
    result = plan_round(snapshot_of([plain], gang("default/two", pods=2).gpu(1)), PROFILE)
    assert [result.placements[f"default/two-{i}"].node for i in (1, 2)] == ["plain", "plain"]
    assert result.placements["default/two-1"].annotations == {}


def test_a_reserved_node_leaves_its_group_and_only_its_count_drops() -> None:
    nodes = [gpu_node(f"gpu-{i}") for i in range(3)]
    state, plugin = state_for(
        nodes, gang("default/a", pods=1).gpu(4), gang("default/b", pods=2).gpu(4)
    )
    first = state.jobs["default/a"]
    everywhere = np.arange(3, dtype=np.int64)
    plugin.reserve(state, first, Plan({"default/a-1": 1}))
    second = state.jobs["default/b"]
    slots = plugin.slot_limits(state, second, state.pending_pods(second), everywhere)
    assert slots is not None and slots.tolist() == [2, 1, 2]
    groups = state.get_or_create(plugin.key).fleet.group.tolist()
    assert groups[0] == groups[2] != groups[1]


def test_node_checks_answer_as_victims_come_back() -> None:
    running = [busy("gpu-1", [0, 1, 2, 3], "low"), busy("gpu-1", [4, 5], "high")]
    snapshot = snapshot_of(
        [gpu_node("gpu-1")], gang("default/train", pods=4).gpu(2), running=running
    )
    state = CycleState(snapshot)
    framework = Framework(Profile.default())
    framework.start(state)
    pods = state.pending_pods(state.jobs["default/train"])[:3]
    low, high = state.bound_id["default/low"], state.bound_id["default/high"]
    released = np.zeros_like(state.used)
    released[0] = state.vector(state.pods["default/low"]) + state.vector(state.pods["default/high"])
    both = np.ones(len(state.bound_keys), dtype=np.bool_)
    with state.releasing(released, both):  # a dry run with both running pods gone
        checks = framework.node_checks(state, {0: pods})[0]
    assert sorted(type(c).__name__ for c in checks) == ["CardCheck", "RoomCheck"]

    def holds(*kept: int) -> bool:
        return all(c.holds_keeping(kept) for c in checks)

    assert holds()  # eight cards for three pods of two
    assert holds(high)  # cards 0-3 and 6-7
    assert not holds(low)  # cards 4-7
    for c in checks:
        c.keep([high])
    assert not holds(low)  # cards 6-7 only
    assert holds()
    # Outside a dry run nothing is released: the devices plugin has no check to give.
    assert [type(c).__name__ for c in framework.node_checks(state, {0: pods})[0]] == ["RoomCheck"]


def half(name: str, minor: int, priority: int) -> PodInfo:
    held = [AllocatedDevice("gpu", minor, 50, 40 * GiB, 50)]
    built = pod(name).request("koordinator.sh/gpu-core", 50)
    built.request("koordinator.sh/gpu-memory-ratio", 50).priority(priority).on("gpu-1")
    return replace(
        built.build(), annotations={ANNOTATION_DEVICE_ALLOCATED: render_device_allocated(held)}
    )


def test_a_victim_the_resource_sums_would_keep_goes_when_the_cards_need_it() -> None:
    # The halves use no nvidia.com/gpu, so by resources seven whole cards are free; by cards six.
    running = [half("half-a", 0, priority=1), half("half-b", 1, priority=2)]
    preemptor = gang("default/big", pods=1).gpu(7).priority(10)
    result = plan_round(snapshot_of([gpu_node("gpu-1")], preemptor, running=running), PROFILE)
    [record] = result.preemptions
    assert record.victim_pods == ("default/half-a",)  # the lower priority half; half-b stays


def test_a_joint_allocation_is_a_template_of_its_own() -> None:
    plain = gang("default/plain", pods=1).gpu(8).pods()[0]
    joint = replace(plain, annotations=JOINT)
    labelled = replace(plain, annotations={"team": "a"})
    # Pods that fit nodes differently never share masks, offer-slot answers or hopeless searches.
    assert template_key(joint) != template_key(plain)
    assert template_key(labelled) == template_key(plain)


def test_checks_keeping_the_same_pods_back_share_one_usage_and_leave_the_node_alone() -> None:
    running = [busy("gpu-1", [0, 1, 2, 3], "low"), busy("gpu-1", [4, 5], "high")]
    snapshot = snapshot_of(
        [gpu_node("gpu-1")], gang("default/train", pods=4).gpu(2), running=running
    )
    state = CycleState(snapshot)
    framework = Framework(Profile.default())
    framework.start(state)
    plugin = framework.plugin(DeviceShare.name)
    assert isinstance(plugin, DeviceShare)
    fleet = state.get_or_create(plugin.key).fleet
    before = list(fleet.usage[0].core)
    pods = state.pending_pods(state.jobs["default/train"])[:3]
    high = state.bound_id["default/high"]
    released = np.zeros_like(state.used)
    released[0] = state.vector(state.pods["default/low"]) + state.vector(state.pods["default/high"])
    both = np.ones(len(state.bound_keys), dtype=np.bool_)
    with state.releasing(released, both):
        first, second = (
            next(c for c in framework.node_checks(state, {0: pods})[0] if isinstance(c, CardCheck))
            for _ in range(2)
        )
    first.keep([high])
    second.keep([high])
    assert first.usage is second.usage and first.key == second.key
    assert first.usage.core == [0, 0, 0, 0, 100, 100, 0, 0]  # only high's cards taken again
    assert fleet.usage[0].core == before  # the node's own usage is never changed by a check


def test_card_checks_answer_as_a_fresh_round_does_whichever_pods_come_back() -> None:
    # Checks of one round remember per node the cards each set of kept pods holds: they must
    # answer as a check of a fresh round that kept the same pods back.
    running = [
        busy("gpu-1", [0, 1], "a"),
        busy("gpu-1", [2, 3, 4], "b"),
        busy("gpu-1", [5], "c"),
        busy("gpu-1", [6, 7], "d"),
    ]

    def round_checks() -> tuple[dict[str, int], Callable[[], CardCheck]]:
        state = CycleState(
            snapshot_of([gpu_node("gpu-1")], gang("default/t", pods=3).gpu(2), running=running)
        )
        framework = Framework(Profile.default())
        framework.start(state)
        pods = state.pending_pods(state.jobs["default/t"])
        released = np.zeros_like(state.used)
        gone = np.ones(len(state.bound_keys), dtype=np.bool_)

        def check() -> CardCheck:
            with state.releasing(released, gone):
                checks = framework.node_checks(state, {0: pods})[0]
            return next(c for c in checks if isinstance(c, CardCheck))

        return {key.split("/")[1]: i for i, key in enumerate(state.bound_keys)}, check

    ids, same_round = round_checks()
    answers = []
    for order in ("abcd", "dcba", "bd", "ca", "abcd"):
        along, kept = same_round(), []
        for name in order:
            asked = (ids[name],)
            plain = round_checks()[1]()
            plain.keep(list(kept))
            holds = along.holds_keeping(asked)
            assert holds == plain.holds_keeping(list(asked))
            answers.append(holds)
            if holds:
                along.keep(asked)
                kept.append(ids[name])
    assert True in answers and False in answers


def test_reasons_count_each_node_once_in_the_order_of_their_first_group() -> None:
    # gpu-0 and gpu-3 idle (the 7-card pod fits), gpu-1 and gpu-4 with 2 cards taken, gpu-2
    # with 6: every busy node lacks cards; the idle ones give no reason.
    nodes = [gpu_node(f"gpu-{i}") for i in range(5)]
    running = [
        busy("gpu-1", [0, 1], "b1"),
        busy("gpu-2", [0, 1, 2, 3, 4, 5], "b2"),
        busy("gpu-4", [6, 7], "b4"),
    ]
    state, plugin = state_for(nodes, gang("default/big", pods=1).cpu(1).gpu(7), running=running)
    ds = state.get_or_create(plugin.key)
    assert isinstance(ds, DeviceState)
    job = state.jobs["default/big"]
    everywhere = np.arange(len(state.nodes), dtype=np.int64)
    once = plugin.explain(state, job, state.pending_pods(job), everywhere)
    assert sum(once.values()) == 3 and len(once) == 1
    [(reason, _)] = once.items()
    assert (reason.code, reason.resource) == (INSUFFICIENT, "gpu")
    # asked again, and over part of the nodes, from what the groups remember
    assert plugin.explain(state, job, state.pending_pods(job), everywhere) == once
    assert plugin.explain(state, job, state.pending_pods(job), everywhere[:2]) == {reason: 1}
    assert plugin.explain(state, job, state.pending_pods(job), everywhere[[0, 3]]) == {}
