"""Reading allocations back from running pods, so cards in use are never handed out twice."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from scheduler.devices import (
    DeviceUsage,
    allocate,
    parse_device_allocated,
    render_device_allocated,
    usage_from_pods,
)
from scheduler.devices.names import ANNOTATION_DEVICE_ALLOCATED as ALLOCATED
from scheduler.devices.partitions import HOPPER_TABLE, parse_partition_table, render_partition_table
from tests.scheduler.devices.builders import JOINT, GiB, eight_gpu_node, request


def test_render_then_parse_gives_the_same_devices() -> None:
    node = eight_gpu_node()
    allocation = allocate(node, DeviceUsage(node), request(JOINT, gpu=3, rdma=1))
    assert allocation is not None
    back = parse_device_allocated(allocation.annotations[ALLOCATED])
    assert sorted(back, key=lambda d: (d.type, d.minor)) == sorted(
        allocation.devices, key=lambda d: (d.type, d.minor)
    )
    assert render_device_allocated(back) == allocation.annotations[ALLOCATED]


def test_running_pods_keep_their_cards() -> None:
    node = eight_gpu_node()
    running = {
        ALLOCATED: json.dumps(
            {
                "gpu": [
                    {
                        "minor": m,
                        "resources": {
                            "koordinator.sh/gpu-core": "100",
                            "koordinator.sh/gpu-memory": "80Gi",
                            "koordinator.sh/gpu-memory-ratio": "100",
                        },
                    }
                    for m in (0, 1)
                ],
                "rdma": [
                    {
                        "minor": 1,
                        "resources": {"koordinator.sh/rdma": "1"},
                        "extension": {"vfs": [{"minor": 0, "busID": "0000:01:00.1"}]},
                    }
                ],
            }
        )
    }
    usage, problems = usage_from_pods(node, [running, {"other": "x"}])
    assert problems == []
    assert usage.memory[:2] == [80 * GiB, 80 * GiB]
    allocation = allocate(node, usage, request(JOINT, gpu=2, rdma=1))
    assert allocation is not None
    assert [d.minor for d in allocation.devices if d.type == "gpu"] == [2, 3]
    # A joint pod on PCIe0 would now get the NIC's second VF.
    usage.apply(allocation.devices)
    usage.release(allocation.devices)
    assert usage.core[2:4] == [0, 0]


def test_malformed_annotations_are_reported_not_fatal() -> None:
    node = eight_gpu_node()
    usage, problems = usage_from_pods(node, [{ALLOCATED: "{oops"}, {ALLOCATED: '{"tpu": []}'}])
    assert len(problems) == 2
    assert usage.core == [0] * 8


@pytest.mark.parametrize(
    "raw",
    [
        '{"gpu": [{"minor": "0"}]}',
        "[]",
        '{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "-1"}}]}',
    ],
)
def test_parse_rejects_bad_shapes(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_device_allocated(raw)


def test_unknown_minors_are_ignored() -> None:
    node = eight_gpu_node()
    usage = DeviceUsage(node)
    usage.apply(
        parse_device_allocated(
            '{"gpu":[{"minor":42,"resources":{"koordinator.sh/gpu-core":"100"}}]}'
        )
    )
    assert usage.core == [0] * 8


def test_partition_table_round_trip_and_errors() -> None:
    assert parse_partition_table(render_partition_table(HOPPER_TABLE)) == HOPPER_TABLE
    for bad in ("{", "{}", '{"two": []}', '{"2": [{"minors": [0]}]}', '{"2": {}}'):
        with pytest.raises(ValueError):
            parse_partition_table(bad)


def test_device_allocatable_matches_the_cards() -> None:
    from scheduler.devices import device_allocatable

    node = eight_gpu_node()
    sick = replace(node.gpus[7], health=False)
    resources = device_allocatable(replace(node, gpus=(*node.gpus[:7], sick)))
    assert resources["nvidia.com/gpu"] == 7
    assert resources["koordinator.sh/gpu-core"] == 700
    assert resources["koordinator.sh/gpu-memory"] == 7 * 80 * GiB
    assert resources["koordinator.sh/rdma"] == 400
    assert "huawei.com/npu-core" not in resources
