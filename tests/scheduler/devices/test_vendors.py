"""Ascend NPUs (full cards and vNPU templates) and Cambricon dynamic sMLU slices, in Koordinator
v1.7's request forms (utils.go `ValidDeviceResourceCombinations`, device_plugin_adapter.go)."""

from __future__ import annotations

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


def vnpu(core: int, cpu: int, memory: int, dvpp: int | None = None):  # type: ignore[no-untyped-def]
    extra = {} if dvpp is None else {"npu_dvpp": dvpp}
    return request(shared=1, npu_core=core, npu_cpu=cpu, memory=memory, **extra)


class TestAscend:
    def test_vnpu_matches_exactly_one_template(self) -> None:
        node = ascend_node()
        allocation = allocate(node, DeviceUsage(node), vnpu(4, 4, 12 * GiB, dvpp=100))
        assert allocation is not None
        (card,) = allocation.devices
        assert card.template == "vir04_4c_dvpp"
        assert allocation.annotations["huawei.com/npu-core"] == "0-vir04_4c_dvpp"
        assert (
            '"gpuSharedResourceTemplate":"vir04_4c_dvpp"'
            in allocation.annotations["scheduling.koordinator.sh/device-allocated"]
        )

    def test_a_request_equal_to_no_template_is_refused_with_koordinators_reason(self) -> None:
        node = ascend_node()
        usage = DeviceUsage(node)
        # vir04 has DVPP 50: leaving npu-dvpp out asks for vir04_3c_ndvpp's shape, not vir04's.
        assert allocate(node, usage, vnpu(4, 4, 12 * GiB)) is None
        assert (
            explain(node, usage, vnpu(3, 3, 12 * GiB)) == "no matched GPU shared resource template"
        )
        assert explain(node, usage, vnpu(4, 3, 12 * GiB)) == ""  # vir04_3c_ndvpp

    def test_vnpus_share_a_card_until_its_ai_cpus_run_out(self) -> None:
        node = ascend_node(cards=1)
        assert count_fits(node, DeviceUsage(node), vnpu(1, 1, 3 * GiB, dvpp=12), limit=20) == 7
        assert count_fits(node, DeviceUsage(node), vnpu(2, 1, 6 * GiB, dvpp=25), limit=20) == 4

    def test_full_cards_are_npu_core_with_memory_ratio(self) -> None:
        node = ascend_node()
        allocation = allocate(node, DeviceUsage(node), request(npu_core=16, ratio=200))
        assert allocation is not None
        assert [d.minor for d in allocation.devices] == [0, 1]
        assert allocation.annotations["huawei.com/npu-core"] == "0,1"
        assert allocation.annotations["scheduling.koordinator.sh/gpu-minors"] == "0,1"

    def test_whole_cards_and_no_vnpu_on_a_taken_card(self) -> None:
        node = ascend_node(cards=2)
        usage = DeviceUsage(node)
        whole = allocate(node, usage, request(npu_core=8, ratio=100))
        assert whole is not None
        assert whole.annotations["huawei.com/npu-core"] == "0"
        usage.apply(whole.devices)
        share = allocate(node, usage, vnpu(1, 1, 3 * GiB, dvpp=12))
        assert share is not None and share.devices[0].minor == 1
        usage.apply(share.devices)
        assert allocate(node, usage, request(npu_core=8, ratio=100)) is None

    def test_plain_gpu_shares_are_refused_on_ascend(self) -> None:
        node = ascend_node()
        assert "vNPU templates" in explain(node, DeviceUsage(node), request(core=50, ratio=50))

    def test_910b3_templates(self) -> None:
        node = ascend_node(model="Ascend-910B3")
        fits = allocate(node, DeviceUsage(node), vnpu(10, 3, 32 * GiB, dvpp=50))
        assert fits is not None and fits.devices[0].template == "vir10_3c_32g"
        assert count_fits(node, DeviceUsage(node), request(npu_core=20, ratio=100), limit=10) == 4

    def test_configmap_templates_replace_the_builtins(self) -> None:
        config = {
            "huawei-Ascend-910B3": {
                "vir10_3c_32g": {
                    "huawei.com/npu-core": 10,
                    "huawei.com/npu-cpu": 3,
                    "koordinator.sh/gpu-memory": "32Gi",
                }
            }
        }
        node = ascend_node(model="Ascend-910B3", cards=1, config=config)
        allocation = allocate(node, DeviceUsage(node), vnpu(10, 3, 32 * GiB))
        assert allocation is not None
        assert allocation.annotations["huawei.com/npu-core"] == "0-vir10_3c_32g"
        assert allocation.devices[0].memory == 32 * GiB


class TestCambricon:
    def test_smlu_profile_annotation(self) -> None:
        node = cambricon_node()
        allocation = allocate(
            node, DeviceUsage(node), request(shared=1, core=20, memory=1000 * MiB)
        )
        assert allocation is not None
        # 1000Mi rounds up to four 256Mi blocks.
        assert allocation.annotations["CAMBRICON_DSMLU_PROFILE"] == "0_20_4"
        assert allocation.annotations["CAMBRICON_DSMLU_ASSIGHED"] == "false"
        assert allocation.devices[0].memory == 1024 * MiB

    def test_shares_without_gpu_shared_work_too_and_whole_cards_are_refused(self) -> None:
        node = cambricon_node()
        share = allocate(node, DeviceUsage(node), request(core=30, memory=2 * GiB))
        assert share is not None and share.annotations["CAMBRICON_DSMLU_PROFILE"] == "0_30_8"
        assert "sMLU only" in explain(node, DeviceUsage(node), request(gpu=1))

    def test_slices_fill_cards_one_by_one(self) -> None:
        node = cambricon_node(cards=2)
        small = request(shared=1, core=25, memory=256 * MiB)
        assert count_fits(node, DeviceUsage(node), small, 100) == 8
        big = request(shared=1, core=10, memory=12 * GiB)
        assert count_fits(node, DeviceUsage(node), big, 100) == 4


def test_vnpu_with_rdma_gets_a_nic_too() -> None:
    from tests.scheduler.devices.builders import rdma

    labels = {LABEL_GPU_VENDOR: "huawei", LABEL_GPU_MODEL: "Ascend-310P3"}
    devices = [gpu(0, numa=0, pcie="0", memory=24 * GiB), rdma(1, numa=0, pcie="0")]
    node = build_node_devices("npu-1", devices, labels=labels)
    allocation = allocate(node, DeviceUsage(node), request(rdma=1, **_VIR01))
    assert allocation is not None
    assert [(d.type, d.minor) for d in allocation.devices] == [("gpu", 0), ("rdma", 1)]


_VIR01 = {"shared": 1, "npu_core": 1, "npu_cpu": 1, "npu_dvpp": 12, "memory": 3 * GiB}
