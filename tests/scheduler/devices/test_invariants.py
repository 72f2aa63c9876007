"""Property: across any sequence of requests and releases, no card or NIC is ever over-allocated."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.devices import (
    AllocatedDevice,
    DeviceRequest,
    DeviceUsage,
    NodeDevices,
    allocate,
    build_node_devices,
)
from scheduler.devices.names import LABEL_GPU_MODEL, LABEL_GPU_VENDOR
from scheduler.devices.request import GPUShape, NPUShape
from tests.scheduler.devices.builders import GiB, eight_gpu_node, gpu

gpu_shapes = st.one_of(
    st.builds(lambda c: GPUShape(c, 100, 0, 100), st.sampled_from([1, 2, 3, 4, 8])),
    st.builds(lambda c, r: GPUShape(1, c, 0, r), st.integers(1, 100), st.integers(1, 100)),
    st.builds(lambda c, m: GPUShape(1, c, m * GiB, 0), st.integers(0, 100), st.integers(1, 80)),
    st.builds(lambda k, p: GPUShape(k, p, 0, p), st.sampled_from([2, 4]), st.integers(1, 50)),
)
requests = st.builds(
    lambda shape, rdma, joint: DeviceRequest(gpu=shape, rdma=rdma, joint=joint and rdma > 0),
    gpu_shapes,
    st.sampled_from([0, 0, 1, 30, 100, 200]),
    st.booleans(),
)
steps = st.lists(st.tuples(requests, st.booleans()), min_size=1, max_size=30)


def assert_within_capacity(node: NodeDevices, usage: DeviceUsage) -> None:
    for i, card in enumerate(node.gpus):
        assert 0 <= usage.core[i] <= card.core
        assert 0 <= usage.ratio[i] <= card.memory_ratio
        assert 0 <= usage.memory[i] <= card.memory
    for j, nic in enumerate(node.rdmas):
        assert 0 <= usage.rdma[j] <= nic.rdma
        assert len(usage.vfs[j]) <= len(nic.vfs)


@settings(max_examples=60, deadline=None)
@given(
    steps=steps, hopper=st.booleans(), scoring=st.sampled_from(["LeastAllocated", "MostAllocated"])
)
def test_no_card_is_ever_over_allocated(
    steps: list[tuple[DeviceRequest, bool]], hopper: bool, scoring: str
) -> None:
    node = eight_gpu_node(labels={LABEL_GPU_MODEL: "H100"} if hopper else {})
    usage = DeviceUsage(node)
    held: list[tuple[AllocatedDevice, ...]] = []
    for request, release_oldest in steps:
        if release_oldest and held:
            usage.release(held.pop(0))
        if request.joint and request.rdma > 100:
            continue  # rejected at validation
        allocation = allocate(node, usage, request, scoring)  # type: ignore[arg-type]
        if allocation is None:
            continue
        gpus = [d for d in allocation.devices if d.type == "gpu"]
        assert request.gpu is not None and len(gpus) == request.gpu.count
        assert len({d.minor for d in gpus}) == len(gpus)
        usage.apply(allocation.devices)
        held.append(allocation.devices)
        assert_within_capacity(node, usage)


npu_requests = st.one_of(
    st.builds(
        lambda c, p, d, g: DeviceRequest(npu=NPUShape(c, p, d, g * GiB)),
        st.sampled_from([1, 2, 4]),
        st.sampled_from([1, 3, 4]),
        st.sampled_from([None, 12, 25, 50, 100]),
        st.sampled_from([3, 6, 12]),
    ),
    st.builds(lambda k: DeviceRequest(gpu=GPUShape(k, 0, 0, 100, npu_core=8)), st.integers(1, 3)),
    st.builds(lambda k: DeviceRequest(gpu=GPUShape(k, 100, 0, 100)), st.integers(1, 3)),
)
mlu_requests = st.builds(
    lambda v, blocks: DeviceRequest(gpu=GPUShape(1, v, blocks * 256 * 1024**2)),
    st.integers(1, 100),
    st.integers(1, 40),
)


def run_sequence(node: NodeDevices, sequence: list[tuple[DeviceRequest, bool]]) -> None:
    usage = DeviceUsage(node)
    held: list[tuple[AllocatedDevice, ...]] = []
    for request, release_oldest in sequence:
        if release_oldest and held:
            usage.release(held.pop(0))
        allocation = allocate(node, usage, request)
        if allocation is None:
            continue
        usage.apply(allocation.devices)
        held.append(allocation.devices)
        assert_within_capacity(node, usage)
        profile = node.ascend
        for i in range(len(node.gpus)):
            if profile is not None:
                assert usage.npu_core[i] <= profile.aicore
                assert usage.npu_cpu[i] <= profile.aicpu
                assert usage.dvpp[i] <= 100


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(npu_requests, st.booleans()), min_size=1, max_size=30))
def test_no_ascend_card_is_over_allocated(sequence: list[tuple[DeviceRequest, bool]]) -> None:
    labels = {LABEL_GPU_VENDOR: "huawei", LABEL_GPU_MODEL: "Ascend-310P3"}
    node = build_node_devices("npu", [gpu(m, memory=24 * GiB) for m in range(4)], labels=labels)
    run_sequence(node, sequence)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(mlu_requests, st.booleans()), min_size=1, max_size=30))
def test_no_mlu_is_over_allocated(sequence: list[tuple[DeviceRequest, bool]]) -> None:
    labels = {LABEL_GPU_VENDOR: "cambricon", LABEL_GPU_MODEL: "MLU370"}
    node = build_node_devices("mlu", [gpu(m, memory=24 * GiB) for m in range(2)], labels=labels)
    run_sequence(node, sequence)
