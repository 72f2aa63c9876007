"""Ascend NPUs (full cards and vNPU templates) and Cambricon dynamic sMLU slices."""

from __future__ import annotations

import pytest

from scheduler.devices import DeviceUsage, allocate, build_node_devices, count_fits, explain
from scheduler.devices.names import LABEL_GPU_MODEL, LABEL_GPU_VENDOR
from tests.scheduler.devices.builders import GiB, gpu, request

MiB = 1024**2


def ascend_node(model: str = "Ascend-310P3", cards: int = 4, config: dict | None = None):  # type: ignore[no-untyped-def]
    labels = {LABEL_GPU_VENDOR: "huawei", LABEL_GPU_MODEL: model}
    devices = [gpu(m, memory=64 * GiB) for m in range(cards)]
    return build_node_devices("npu-1", devices, labels=labels, template_config=config)


def cambricon_node(cards: int = 2):  # type: ignore[no-untyped-def]
    labels = {LABEL_GPU_VENDOR: "cambricon", LABEL_GPU_MODEL: "MLU370"}
    return build_node_devices(
        "mlu-1", [gpu(m, memory=24 * GiB) for m in range(cards)], labels=labels
    )


class TestAscend:
    def test_vnpu_matches_exactly_one_template(self) -> None:
        node = ascend_node()
        allocation = allocate(node, DeviceUsage(node), request(npu_core=4, npu_cpu=4, npu_dvpp=100))
        assert allocation is not None
        (card,) = allocation.devices
        assert card.template == "vir04_4c_dvpp"
        assert allocation.annotations["huawei.com/npu-core"] == "0-vir04_4c_dvpp"
        assert (
            '"gpuSharedResourceTemplate":"vir04_4c_dvpp"'
            in allocation.annotations["scheduling.koordinator.sh/device-allocated"]
        )

    def test_ambiguous_and_unknown_shapes_are_explained(self) -> None:
        node = ascend_node()
        usage = DeviceUsage(node)
        assert allocate(node, usage, request(npu_core=4)) is None
        assert "matches 4 vNPU templates" in explain(node, usage, request(npu_core=4))
        assert "no vNPU template of 310P" in explain(node, usage, request(npu_core=3))

    def test_vnpus_share_a_card_until_its_ai_cores_run_out(self) -> None:
        node = ascend_node(cards=1)
        assert count_fits(node, DeviceUsage(node), request(npu_core=1), limit=20) == 7  # 7 AI CPUs
        assert count_fits(node, DeviceUsage(node), request(npu_core=2, npu_cpu=1), limit=20) == 4

    def test_full_cards_by_ai_cores_list_the_minors(self) -> None:
        node = ascend_node()
        allocation = allocate(node, DeviceUsage(node), request(npu_core=16))
        assert allocation is not None
        assert [d.minor for d in allocation.devices] == [0, 1]
        assert allocation.annotations["huawei.com/npu-core"] == "0,1"

    def test_whole_cards_by_gpu_count_and_no_vnpu_on_a_taken_card(self) -> None:
        node = ascend_node(cards=2)
        usage = DeviceUsage(node)
        whole = allocate(node, usage, request(gpu=1))
        assert whole is not None
        assert whole.annotations["huawei.com/npu-core"] == "0"
        usage.apply(whole.devices)
        vnpu = allocate(node, usage, request(npu_core=1))
        assert vnpu is not None and vnpu.devices[0].minor == 1
        usage.apply(vnpu.devices)
        assert allocate(node, usage, request(gpu=1)) is None  # card 1 is carved, card 0 is taken

    def test_plain_gpu_shares_are_refused_on_ascend(self) -> None:
        node = ascend_node()
        assert "vNPU templates" in explain(node, DeviceUsage(node), request(core=50, ratio=50))

    def test_910b3_templates(self) -> None:
        node = ascend_node(model="Ascend-910B3")
        allocation = allocate(node, DeviceUsage(node), request(npu_core=10, npu_cpu=3))
        assert allocation is None  # vir10_3c_16g and vir10_3c_32g both match
        allocation = allocate(node, DeviceUsage(node), request(npu_core=5, npu_cpu=1, npu_dvpp=25))
        assert allocation is None  # vir05_1c_8g and vir05_1c_16g
        assert count_fits(node, DeviceUsage(node), request(npu_core=20), limit=10) == 4

    def test_configmap_templates_replace_the_builtins(self) -> None:
        config = {
            "huawei-Ascend-910B3": {
                "vir10_3c_32g": {
                    "huawei.com/npu-core": 10,
                    "huawei.com/npu-cpu": 3,
                    "huawei.com/npu-dvpp": 50,
                    "koordinator.sh/gpu-memory-ratio": 50,
                }
            }
        }
        node = ascend_node(model="Ascend-910B3", cards=1, config=config)
        allocation = allocate(node, DeviceUsage(node), request(npu_core=10, npu_cpu=3))
        assert allocation is not None
        assert allocation.annotations["huawei.com/npu-core"] == "0-vir10_3c_32g"
        assert allocation.devices[0].memory == 32 * GiB


class TestCambricon:
    def test_smlu_profile_annotation(self) -> None:
        node = cambricon_node()
        allocation = allocate(node, DeviceUsage(node), request(vcore=20, vmemory=1000 * MiB))
        assert allocation is not None
        # 1000Mi rounds up to four 256Mi blocks.
        assert allocation.annotations["CAMBRICON_DSMLU_PROFILE"] == "0_20_4"
        assert allocation.annotations["CAMBRICON_DSMLU_ASSIGHED"] == "false"
        assert allocation.devices[0].memory == 1024 * MiB

    def test_generic_share_becomes_an_smlu_and_whole_cards_are_refused(self) -> None:
        node = cambricon_node()
        share = allocate(node, DeviceUsage(node), request(core=30, memory=2 * GiB))
        assert share is not None and share.annotations["CAMBRICON_DSMLU_PROFILE"] == "0_30_8"
        assert "sMLU only" in explain(node, DeviceUsage(node), request(gpu=1))

    def test_slices_fill_cards_one_by_one(self) -> None:
        node = cambricon_node(cards=2)
        assert count_fits(node, DeviceUsage(node), request(vcore=25, vmemory=256 * MiB), 100) == 8
        assert count_fits(node, DeviceUsage(node), request(vcore=10, vmemory=12 * GiB), 100) == 4

    @pytest.mark.parametrize("resources", [{"vcore": 10, "vmemory": 256 * MiB}])
    def test_mlu_requests_do_not_fit_gpu_nodes(self, resources: dict[str, int]) -> None:
        node = build_node_devices("gpu-1", [gpu(0)])
        assert "no Cambricon MLU" in explain(node, DeviceUsage(node), request(**resources))


def test_vnpu_with_rdma_gets_a_nic_too() -> None:
    from tests.scheduler.devices.builders import rdma

    labels = {LABEL_GPU_VENDOR: "huawei", LABEL_GPU_MODEL: "Ascend-310P3"}
    devices = [gpu(0, numa=0, pcie="0", memory=24 * GiB), rdma(1, numa=0, pcie="0")]
    node = build_node_devices("npu-1", devices, labels=labels)
    allocation = allocate(node, DeviceUsage(node), request(npu_core=1, rdma=1))
    assert allocation is not None
    assert [(d.type, d.minor) for d in allocation.devices] == [("gpu", 0), ("rdma", 1)]
