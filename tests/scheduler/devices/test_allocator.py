"""GPU and RDMA choice on one node: koordinator.md's examples, scoring, partitions, counts."""

from __future__ import annotations

import json

import pytest

from scheduler.devices import (
    AllocatedDevice,
    DeviceAllocation,
    DeviceUsage,
    allocate,
    count_fits,
    explain,
    node_score,
)
from scheduler.devices.names import ANNOTATION_DEVICE_ALLOCATED, LABEL_GPU_MODEL
from scheduler.devices.names import LABEL_PARTITION_POLICY as POLICY
from tests.scheduler.devices.builders import (
    JOINT,
    GiB,
    eight_gpu_node,
    plain_gpu_node,
    request,
)


def minors(allocation: DeviceAllocation | None, device_type: str = "gpu") -> list[int]:
    assert allocation is not None
    return [d.minor for d in allocation.devices if d.type == device_type]


@pytest.mark.parametrize(
    ("cards", "gpus", "nics"),
    [
        (1, [0], [1]),
        (2, [0, 1], [1]),
        (3, [0, 1, 2], [1, 2]),
        (4, [0, 1, 2, 3], [1, 2]),
        (8, list(range(8)), [1, 2, 3, 4]),
    ],
)
def test_public_joint_examples_pick_the_deepest_scope_and_its_nics(
    cards: int, gpus: list[int], nics: list[int]
) -> None:
    node = eight_gpu_node()
    allocation = allocate(node, DeviceUsage(node), request(JOINT, gpu=cards, rdma=1))
    assert minors(allocation) == gpus
    assert minors(allocation, "rdma") == nics


def test_public_shared_example_least_allocated_takes_the_first_free_card() -> None:
    # Minors 1..4 with 1 and 2 half used: a 50% share goes to minor 3 (least used, lowest minor).
    node = plain_gpu_node(range(1, 5))
    usage = DeviceUsage(node)
    usage.apply([AllocatedDevice("gpu", m, 50, 4 * GiB, 50) for m in (1, 2)])
    allocation = allocate(node, usage, request(core=50, ratio=50))
    assert minors(allocation) == [3]
    assert allocation is not None
    assert allocation.devices[0].memory == 4 * GiB  # the ratio fills in the card's bytes


def test_most_allocated_packs_onto_the_half_used_card() -> None:
    node = plain_gpu_node(range(1, 5))
    usage = DeviceUsage(node)
    usage.apply([AllocatedDevice("gpu", m, 50, 4 * GiB, 50) for m in (3, 4)])
    allocation = allocate(node, usage, request(core=50, ratio=50), scoring="MostAllocated")
    assert minors(allocation) == [3]


def test_whole_card_never_lands_on_a_shared_card() -> None:
    node = plain_gpu_node(range(2))
    usage = DeviceUsage(node)
    usage.apply([AllocatedDevice("gpu", 0, 10, 1 * GiB, 10)])
    assert minors(allocate(node, usage, request(gpu=1))) == [1]
    usage.apply([AllocatedDevice("gpu", 1, 10, 1 * GiB, 10)])
    assert allocate(node, usage, request(gpu=1)) is None
    assert "Insufficient gpu" in explain(node, usage, request(gpu=1))


def test_memory_request_turns_into_a_ratio_of_the_card() -> None:
    node = plain_gpu_node([0], memory=8 * GiB)
    allocation = allocate(node, DeviceUsage(node), request(core=25, memory=2 * GiB))
    assert allocation is not None
    (card,) = allocation.devices
    assert (card.core, card.memory, card.memory_ratio) == (25, 2 * GiB, 25)


def test_gpu_shared_spreads_the_totals_over_cards() -> None:
    node = eight_gpu_node()
    allocation = allocate(node, DeviceUsage(node), request(shared=2, core=100, ratio=100))
    assert allocation is not None
    assert [(d.minor, d.core, d.memory_ratio) for d in allocation.devices] == [
        (0, 50, 50),
        (1, 50, 50),
    ]


def test_scope_prefers_the_partly_used_pcie_switch() -> None:
    node = eight_gpu_node()
    usage = DeviceUsage(node)
    usage.apply([AllocatedDevice("gpu", 2, 100, 80 * GiB, 100)])
    # PCIe1 has one free card left: a 1-card pod fills it rather than opening PCIe0.
    assert minors(allocate(node, usage, request(gpu=1))) == [3]
    # Two cards: PCIe0 is the only switch with two free.
    assert minors(allocate(node, usage, request(gpu=2))) == [0, 1]


def test_unhealthy_cards_are_never_chosen() -> None:
    node = plain_gpu_node([0])
    sick = node.__class__(node="n", gpus=(node.gpus[0].__class__("gpu", 0, health=False),))
    assert allocate(sick, DeviceUsage(sick), request(gpu=1)) is None


def test_count_fits_allocates_one_pod_after_another() -> None:
    node = eight_gpu_node()
    usage = DeviceUsage(node)
    assert count_fits(node, usage, request(gpu=1), limit=100) == 8
    assert count_fits(node, usage, request(gpu=3), limit=100) == 2
    assert count_fits(node, usage, request(gpu=1), limit=5) == 5
    assert count_fits(node, usage, request(core=30, ratio=30), limit=100) == 24
    assert count_fits(node, usage, request(JOINT, gpu=2, rdma=1), limit=100) == 4
    assert usage.core == [0] * 8  # counting never touches the caller's usage


def test_joint_allocation_uses_the_next_free_vf_and_needs_a_nic() -> None:
    node = eight_gpu_node()
    usage = DeviceUsage(node)
    first = allocate(node, usage, request(JOINT, core=50, ratio=50, rdma=1))
    assert first is not None
    usage.apply(first.devices)
    second = allocate(node, usage, request(JOINT, core=50, ratio=50, rdma=1))
    assert second is not None
    usage.apply(second.devices)
    vfs = [d.vfs[0].minor for a in (first, second) for d in a.devices if d.type == "rdma"]
    assert vfs == [0, 1]
    # Two VFs per NIC: with both taken on PCIe0, the next joint pod moves to PCIe1.
    third = allocate(node, usage, request(JOINT, core=50, ratio=50, rdma=1))
    assert minors(third) == [2]
    assert minors(third, "rdma") == [2]


def test_rdma_alone_prefers_nics_near_the_chosen_gpus() -> None:
    node = eight_gpu_node()
    usage = DeviceUsage(node)
    usage.apply([AllocatedDevice("gpu", m, 100, 80 * GiB, 100) for m in range(4)])
    allocation = allocate(node, usage, request(gpu=1, rdma=1))
    assert minors(allocation) == [4]
    assert minors(allocation, "rdma") == [3]


def test_annotation_has_koordinators_shape() -> None:
    node = eight_gpu_node()
    allocation = allocate(node, DeviceUsage(node), request(JOINT, gpu=1, rdma=1))
    assert allocation is not None
    data = json.loads(allocation.annotations[ANNOTATION_DEVICE_ALLOCATED])
    assert data == {
        "gpu": [
            {
                "minor": 0,
                "resources": {
                    "koordinator.sh/gpu-core": "100",
                    "koordinator.sh/gpu-memory": str(80 * GiB),
                    "koordinator.sh/gpu-memory-ratio": "100",
                },
            }
        ],
        "rdma": [
            {
                "minor": 1,
                "resources": {"koordinator.sh/rdma": "1"},
                "extension": {"vfs": [{"minor": 0, "busID": "0000:01:00.1"}]},
            }
        ],
    }


class TestPartitions:
    def test_two_cards_keep_the_quads_whole(self) -> None:
        node = eight_gpu_node(labels={LABEL_GPU_MODEL: "H800"})
        usage = DeviceUsage(node)
        usage.apply([AllocatedDevice("gpu", 0, 100, 80 * GiB, 100)])
        # The pair {2,3} would break quad {0..3} that is already broken; {4,5} would break the
        # free quad {4..7}. Keeping the most large partitions free means {2,3}.
        assert minors(allocate(node, usage, request(gpu=2))) == [2, 3]
        # A single card goes next to the used one, leaving every free pair intact.
        assert minors(allocate(node, usage, request(gpu=1))) == [1]

    def test_honor_refuses_cards_outside_the_table(self) -> None:
        node = eight_gpu_node(labels={LABEL_GPU_MODEL: "H20", POLICY: "Honor"})
        usage = DeviceUsage(node)
        usage.apply([AllocatedDevice("gpu", m, 100, 80 * GiB, 100) for m in (0, 2, 4, 6)])
        # Four free cards but no free pair: Honor refuses, Prefer falls back to topology.
        assert allocate(node, usage, request(gpu=2)) is None
        assert explain(node, usage, request(gpu=2)) == "Insufficient Partitioned GPU Devices"
        assert allocate(node, usage, request(gpu=3)) is None  # no 3-card partition exists
        prefer = eight_gpu_node(labels={LABEL_GPU_MODEL: "H20"})
        assert minors(allocate(prefer, usage, request(gpu=2))) == [1, 3]

    def test_annotated_table_overrides_the_builtin(self) -> None:
        from scheduler.devices import build_node_devices
        from scheduler.devices.names import ANNOTATION_GPU_PARTITIONS

        node = eight_gpu_node()
        table = json.dumps({"2": [{"minors": [6, 7]}, {"minors": [0, 4], "allocationScore": 2}]})
        annotated = build_node_devices(
            "n",
            list(node.gpus),
            device_labels={POLICY: "Honor"},
            device_annotations={ANNOTATION_GPU_PARTITIONS: table},
        )
        assert minors(allocate(annotated, DeviceUsage(annotated), request(gpu=2))) == [0, 4]
        # Honor on the Device and no 4-card partition in its table: Koordinator's reason.
        usage = DeviceUsage(annotated)
        assert (
            explain(annotated, usage, request(gpu=4))
            == "node(s) Unsupported number of GPU requests"
        )

    def test_the_device_table_brings_the_device_policy_and_the_node_is_only_a_fallback(
        self,
    ) -> None:
        from scheduler.devices import build_node_devices
        from scheduler.devices.names import ANNOTATION_GPU_PARTITIONS

        gpus = list(eight_gpu_node().gpus)
        table = json.dumps({"2": [{"minors": [0, 1]}]})
        # allocator_gpu.go: with a table on the Device the Node's policy label is not read.
        node_says_honor = build_node_devices(
            "n",
            gpus,
            labels={POLICY: "Honor"},
            device_annotations={ANNOTATION_GPU_PARTITIONS: table},
        )
        assert node_says_honor.partition_policy == "Prefer"
        assert minors(allocate(node_says_honor, DeviceUsage(node_says_honor), request(gpu=4))) == [
            0,
            1,
            2,
            3,
        ]
        # Without a table on the Device, the Node's model and policy label are the fallback.
        fallback = build_node_devices("n", gpus, labels={LABEL_GPU_MODEL: "H100", POLICY: "Honor"})
        assert fallback.partition_policy == "Honor" and fallback.partitions is not None

    def test_honor_without_any_table_refuses_every_whole_card_request(self) -> None:
        # allocateByPartition: Honor and no partition indexer -> ErrNodeMissingGPUPartitionTable,
        # for one card as for eight; shared requests never look at partitions.
        node = eight_gpu_node(labels={POLICY: "Honor"})
        usage = DeviceUsage(node)
        assert explain(node, usage, request(gpu=1)) == "node(s) missing GPU Partition Table"
        assert explain(node, usage, request(gpu=8)) == "node(s) missing GPU Partition Table"
        assert allocate(node, usage, request(core=50, ratio=50)) is not None


def test_node_score_follows_the_strategy() -> None:
    node = plain_gpu_node(range(2))
    usage = DeviceUsage(node)
    allocation = allocate(node, usage, request(gpu=1))
    assert node_score(node, usage, allocation, "LeastAllocated") == 50
    assert node_score(node, usage, allocation, "MostAllocated") == 50
    usage.apply([AllocatedDevice("gpu", 0, 100, 8 * GiB, 100)])
    half_then_full = allocate(node, usage, request(core=50, ratio=50))
    assert node_score(node, usage, half_then_full, "MostAllocated") == 75
    assert node_score(node, usage, half_then_full, "LeastAllocated") == 25
