"""Device request parsing and the submission-time validation messages."""

from __future__ import annotations

import pytest

from scheduler.devices import DeviceRequestError, parse_device_request, validate_device_request
from scheduler.devices.request import GPUShape, MLUShape, NPUShape
from tests.scheduler.devices.builders import JOINT, GiB

MiB = 1024**2


@pytest.mark.parametrize(
    ("resources", "shape"),
    [
        ({"nvidia.com/gpu": 2}, GPUShape(2, 100, 0, 100)),
        (
            {"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50},
            GPUShape(1, 50, 0, 50),
        ),
        (
            {"koordinator.sh/gpu-core": 20, "koordinator.sh/gpu-memory": "4Gi"},
            GPUShape(1, 20, 4 * GiB, 0),
        ),
        (
            {"koordinator.sh/gpu-core": 200, "koordinator.sh/gpu-memory-ratio": 200},
            GPUShape(2, 100, 0, 100),
        ),
        ({"koordinator.sh/gpu-memory-ratio": 300}, GPUShape(3, 100, 0, 100)),
        ({"koordinator.sh/gpu-memory": 8 * GiB}, GPUShape(1, 0, 8 * GiB, 0)),
        ({"koordinator.sh/gpu": 50}, GPUShape(1, 50, 0, 50)),
        ({"koordinator.sh/gpu": 200}, GPUShape(2, 100, 0, 100)),
        (
            {
                "koordinator.sh/gpu.shared": 2,
                "koordinator.sh/gpu-core": 100,
                "koordinator.sh/gpu-memory": 16 * GiB,
            },
            GPUShape(2, 50, 8 * GiB, 0),
        ),
    ],
)
def test_valid_gpu_requests(resources: dict[str, object], shape: GPUShape) -> None:
    request = parse_device_request(resources)
    assert request is not None
    assert request.gpu == shape


def test_whole_card_shape_is_whole() -> None:
    request = parse_device_request({"nvidia.com/gpu": 1})
    assert request is not None and request.gpu is not None and request.gpu.whole


def test_no_device_resources_means_no_request() -> None:
    assert parse_device_request({"cpu": 4000, "memory": 8 * GiB}) is None
    assert parse_device_request({"nvidia.com/gpu": 0}) is None


def test_vendor_requests() -> None:
    npu = parse_device_request(
        {"huawei.com/npu-core": 4, "huawei.com/npu-cpu": 4, "huawei.com/npu-dvpp": 100}
    )
    assert npu is not None and npu.npu == NPUShape(4, 4, 100)
    mlu = parse_device_request(
        {"cambricon.com/mlu.smlu.vcore": 20, "cambricon.com/mlu.smlu.vmemory": 512 * MiB}
    )
    assert mlu is not None and mlu.mlu == MLUShape(20, 512 * MiB)


def test_joint_request() -> None:
    request = parse_device_request({"nvidia.com/gpu": 2, "koordinator.sh/rdma": 1}, JOINT)
    assert request is not None and request.joint and request.rdma == 1


@pytest.mark.parametrize(
    ("resources", "annotations", "message"),
    [
        (
            {"nvidia.com/gpu": 1, "koordinator.sh/gpu-core": 50},
            {},
            "cannot be combined with koordinator.sh/gpu-core",
        ),
        ({"koordinator.sh/gpu-core": 50}, {}, "needs koordinator.sh/gpu-memory or"),
        ({"koordinator.sh/gpu": 50, "koordinator.sh/gpu-core": 50}, {}, "cannot be combined"),
        ({"koordinator.sh/gpu": 150}, {}, "equal multiples of 100"),
        (
            {
                "koordinator.sh/gpu-core": 50,
                "koordinator.sh/gpu-memory": 1,
                "koordinator.sh/gpu-memory-ratio": 5,
            },
            {},
            "not both",
        ),
        (
            {"koordinator.sh/gpu-core": 150, "koordinator.sh/gpu-memory-ratio": 150},
            {},
            "equal multiples of 100",
        ),
        (
            {"koordinator.sh/gpu-core": 200, "koordinator.sh/gpu-memory-ratio": 100},
            {},
            "equal multiples of 100",
        ),
        (
            {"koordinator.sh/gpu-core": 200, "koordinator.sh/gpu-memory": 8 * GiB},
            {},
            "equal multiples of 100",
        ),
        (
            {
                "koordinator.sh/gpu.shared": 2,
                "koordinator.sh/gpu-core": 75,
                "koordinator.sh/gpu-memory-ratio": 100,
            },
            {},
            "divide evenly",
        ),
        (
            {
                "koordinator.sh/gpu.shared": 2,
                "koordinator.sh/gpu-core": 300,
                "koordinator.sh/gpu-memory-ratio": 300,
            },
            {},
            "at most 100%",
        ),
        ({"huawei.com/npu-cpu": 1}, {}, "need huawei.com/npu-core"),
        ({"huawei.com/npu-core": 4, "huawei.com/npu-dvpp": 150}, {}, "percentage"),
        ({"huawei.com/npu-core": 4, "nvidia.com/gpu": 1}, {}, "one kind of accelerator"),
        ({"cambricon.com/mlu.smlu.vcore": 10}, {}, "needs both"),
        (
            {"cambricon.com/mlu.smlu.vcore": 10, "cambricon.com/mlu.smlu.vmemory": 100 * MiB},
            {},
            "at least 256Mi",
        ),
        ({"koordinator.sh/gpu-cores": 1}, {}, "unknown device resource koordinator.sh/gpu-cores"),
        ({"nvidia.com/gpu": "two"}, {}, "non-negative integer"),
        ({"koordinator.sh/rdma": 150}, {}, "multiple of 100"),
        ({"nvidia.com/gpu": 1}, JOINT, "needs both a GPU request and koordinator.sh/rdma"),
        (
            {"nvidia.com/gpu": 1, "koordinator.sh/rdma": 1},
            {"scheduling.koordinator.sh/device-joint-allocate": "{bad"},
            "not valid JSON",
        ),
        (
            {"nvidia.com/gpu": 1, "koordinator.sh/rdma": 1},
            {"scheduling.koordinator.sh/device-joint-allocate": '{"deviceTypes":["gpu","fpga"]}'},
            'deviceTypes must be ["gpu","rdma"]',
        ),
        (
            {"nvidia.com/gpu": 1, "koordinator.sh/rdma": 1},
            {
                "scheduling.koordinator.sh/device-joint-allocate": (
                    '{"deviceTypes":["gpu","rdma"],"requiredScope":"SameNUMA"}'
                )
            },
            "requiredScope 'SameNUMA' is not supported",
        ),
    ],
)
def test_invalid_requests_say_what_is_wrong(
    resources: dict[str, object], annotations: dict[str, str], message: str
) -> None:
    problems = validate_device_request(resources, annotations)
    assert any(message in p for p in problems), problems
    with pytest.raises(DeviceRequestError):
        parse_device_request(resources, annotations)


def test_every_problem_is_reported_at_once() -> None:
    problems = validate_device_request({"koordinator.sh/gpu-cores": 1, "nvidia.com/gpu": "x"})
    assert len(problems) == 2


def test_valid_requests_have_no_problems() -> None:
    assert validate_device_request({"nvidia.com/gpu": 8, "koordinator.sh/rdma": 1}, JOINT) == []
    assert validate_device_request({"cpu": 1000}) == []
