"""Device request parsing: Koordinator v1.7's valid combinations, conversion and reasons.

The cases follow pkg/scheduler/plugins/deviceshare/utils_test.go at v1.7.0
(`TestValidateDeviceRequest`, `TestConvertDeviceRequest`) plus the per-card split of
devicehandler_gpu.go's `calcDesiredRequestsAndCountForGPU`.
"""

from __future__ import annotations

import itertools

import pytest

from scheduler.devices import DeviceRequestError, parse_device_request, validate_device_request
from scheduler.devices import names as n
from scheduler.devices.request import VALID_GPU_COMBINATIONS, GPUShape, NPUShape
from tests.scheduler.devices.builders import JOINT, GiB

GPU = "nvidia.com/gpu"
CORE, MEM, RATIO, SHARED = (
    "koordinator.sh/gpu-core",
    "koordinator.sh/gpu-memory",
    "koordinator.sh/gpu-memory-ratio",
    "koordinator.sh/gpu.shared",
)
NPU, NPU_CPU, DVPP = "huawei.com/npu-core", "huawei.com/npu-cpu", "huawei.com/npu-dvpp"


@pytest.mark.parametrize(
    ("resources", "shape"),
    [
        # TestValidateDeviceRequest "valid gpu request 2" / TestConvertDeviceRequest "nvidiaGPU"
        ({GPU: 2}, GPUShape(2, 100, 0, 100)),
        ({"dcu.com/gpu": 2}, GPUShape(2, 100, 0, 100)),  # "valid hygon duc request 2"
        ({"amd.com/gpu": 1}, GPUShape(1, 100, 0, 100)),
        ({"koordinator.sh/gpu": 200}, GPUShape(2, 100, 0, 100)),  # "valid gpu request 2"
        ({"koordinator.sh/gpu": 50}, GPUShape(1, 50, 0, 50)),  # convert "koordGPU"
        ({CORE: 200, MEM: 64 * GiB}, GPUShape(1, 200, 64 * GiB, 0)),  # "valid gpu request 3"
        ({CORE: 200, RATIO: 200}, GPUShape(2, 100, 0, 100)),  # "valid gpu request 4"
        ({RATIO: 200}, GPUShape(2, 0, 0, 100)),  # "valid gpu request 5"
        ({MEM: 64 * GiB}, GPUShape(1, 0, 64 * GiB, 0)),  # "valid gpu request 7"
        ({RATIO: 200, SHARED: 2}, GPUShape(2, 0, 0, 100)),  # "valid gpu request 12"
        ({RATIO: 100, SHARED: 2}, GPUShape(2, 0, 0, 50)),  # "valid gpu request 13"
        ({CORE: 100, MEM: 64 * GiB, SHARED: 1}, GPUShape(1, 100, 64 * GiB, 0)),  # "... 14"
        ({CORE: 100, MEM: 64 * GiB, SHARED: 2}, GPUShape(2, 50, 32 * GiB, 0)),  # "... 15"
        # "valid huawei npu request": two whole Ascend cards of 20 AI cores each
        ({NPU: 40, RATIO: 200}, GPUShape(2, 0, 0, 100, npu_core=20)),
        # Koordinator accepts a core percentage above one card with ratio 100: it fits no card.
        ({CORE: 200, RATIO: 100}, GPUShape(1, 200, 0, 100)),
    ],
)
def test_valid_gpu_requests(resources: dict[str, object], shape: GPUShape) -> None:
    request = parse_device_request(resources)
    assert request is not None
    assert request.gpu == shape


def test_vnpu_requests() -> None:
    # TestValidateDeviceRequest "valid shared huawei npu request" (both forms)
    plain = parse_device_request({SHARED: 1, NPU: 10, NPU_CPU: 3, MEM: 16 * GiB})
    assert plain is not None and plain.npu == NPUShape(10, 3, None, 16 * GiB)
    dvpp = parse_device_request({SHARED: 1, NPU: 10, NPU_CPU: 3, DVPP: 100, MEM: 16 * GiB})
    assert dvpp is not None and dvpp.npu == NPUShape(10, 3, 100, 16 * GiB)


def test_rdma_and_fpga() -> None:
    rdma = parse_device_request({"koordinator.sh/rdma": 80})  # convert "rdma"
    assert rdma is not None and rdma.rdma == 80
    fpga = parse_device_request({"koordinator.sh/fpga": 80})  # convert "fpga"
    assert fpga is not None and fpga.fpga == 80


def test_whole_card_shape_is_whole() -> None:
    request = parse_device_request({GPU: 1})
    assert request is not None and request.gpu is not None and request.gpu.whole


def test_no_device_resources_means_no_request() -> None:
    assert parse_device_request({"cpu": 4000, "memory": 8 * GiB}) is None
    assert parse_device_request({GPU: 0}) is None


def test_joint_request() -> None:
    request = parse_device_request({GPU: 2, "koordinator.sh/rdma": 1}, JOINT)
    assert request is not None and request.joint and request.rdma == 1


def _names(*names: str) -> str:
    return f"invalid resource device requests: [{' '.join(sorted(names))}]"


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({CORE: 101}, _names(CORE)),  # "invalid gpu request 1"
        (  # "invalid gpu request 2"
            {GPU: 2, "koordinator.sh/gpu": 200, CORE: 200, MEM: 32 * GiB, RATIO: 200},
            "invalid resource device requests: [",
        ),
        ({"koordinator.sh/gpu": 101}, "invalid resource unit koordinator.sh/gpu: 101"),  # "... 3"
        ({CORE: 100, RATIO: 101}, _names(CORE, RATIO)),  # "invalid gpu request 4"
        ({RATIO: 101, SHARED: 1}, _names(RATIO, SHARED)),  # "invalid gpu request 8"
        ({RATIO: 101, SHARED: 2}, _names(RATIO, SHARED)),  # "invalid gpu request 9"
        ({CORE: 101, MEM: 64 * GiB, SHARED: 1}, _names(CORE, MEM, SHARED)),  # "... 10"
        ({CORE: 101, MEM: 64 * GiB, SHARED: 2}, _names(CORE, MEM, SHARED)),  # "... 11"
        ({NPU: 40, MEM: 128 * GiB}, _names(NPU, MEM)),  # "invalid huawei npu request"
        ({NPU: 4}, _names(NPU)),  # npu-core alone is not a request Koordinator knows
        ({SHARED: 2, NPU: 10, NPU_CPU: 3, MEM: 16 * GiB}, _names(SHARED, NPU, NPU_CPU, MEM)),
        (
            {SHARED: 1, NPU: 4, NPU_CPU: 4, DVPP: 150, MEM: GiB},
            _names(SHARED, NPU, NPU_CPU, DVPP, MEM),
        ),
        ({GPU: 1, CORE: 50}, _names(GPU, CORE)),
        ({"koordinator.sh/rdma": 150}, "invalid resource unit koordinator.sh/rdma: 150"),
        ({GPU: "two"}, "non-negative integer"),
    ],
)
def test_invalid_requests_carry_koordinators_reason(
    resources: dict[str, object], message: str
) -> None:
    problems = validate_device_request(resources)
    assert any(message in p for p in problems), problems
    with pytest.raises(DeviceRequestError):
        parse_device_request(resources)


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"scheduling.koordinator.sh/device-joint-allocate": "{bad"}, "not valid JSON"),
        (
            {"scheduling.koordinator.sh/device-joint-allocate": '{"deviceTypes":["gpu","fpga"]}'},
            'deviceTypes must be ["gpu","rdma"]',
        ),
    ],
)
def test_joint_annotation_problems(annotations: dict[str, str], message: str) -> None:
    problems = validate_device_request({GPU: 1, "koordinator.sh/rdma": 1}, annotations)
    assert any(message in p for p in problems), problems


def test_every_set_of_gpu_names_is_accepted_exactly_when_koordinator_lists_it() -> None:
    names = sorted(n.GPU_RESOURCES)
    for size in range(1, 6):
        for combo in itertools.combinations(names, size):
            # amounts that pass every range check: 1 card, 100 percent, 1 GiB, 4 cores
            amounts = {
                name: 1 if name in (SHARED, *n.WHOLE_CARD_RESOURCES) else 100 for name in combo
            }
            if MEM in amounts:
                amounts[MEM] = GiB
            accepted = not validate_device_request(amounts)
            assert accepted == (frozenset(combo) in VALID_GPU_COMBINATIONS), combo


def test_valid_requests_have_no_problems() -> None:
    assert validate_device_request({GPU: 8, "koordinator.sh/rdma": 1}, JOINT) == []
    assert validate_device_request({"cpu": 1000}) == []
