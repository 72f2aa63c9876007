"""Huawei Ascend NPUs: card profiles, built-in vNPU templates, ConfigMap overrides, matching.

Koordinator v1.7's forms: whole cards are `huawei.com/npu-core` + `koordinator.sh/gpu-memory-ratio`
(one card per 100 percent); a vNPU is `koordinator.sh/gpu.shared: 1` + `huawei.com/npu-core` +
`huawei.com/npu-cpu` (+ `huawei.com/npu-dvpp`) + `koordinator.sh/gpu-memory`, and must equal one
template of the card's model exactly (Koordinator's strict template match), else "no matched GPU
shared resource template". One vNPU lives on one card. The built-in templates follow the Ascend
virtualization tables (310P: 8 AI cores, 7 AI CPUs, 24 GiB; 910B3: 20 AI cores, 7 AI CPUs,
64 GiB), the same values as Koordinator's template ConfigMap examples.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.devices import names as n
from scheduler.devices.model import AscendProfile, VnpuTemplate
from scheduler.devices.quantity import to_int
from scheduler.devices.request import NPUShape

ERR_NO_MATCHED_TEMPLATE = "no matched GPU shared resource template"
_GI = 1024**3


def _templates(*rows: tuple[str, int, int, int, int, int]) -> tuple[VnpuTemplate, ...]:
    return tuple(
        VnpuTemplate(name, core, cpu, dvpp, ratio, gib * _GI)
        for name, core, cpu, dvpp, ratio, gib in rows
    )


BUILTIN_PROFILES: Mapping[str, AscendProfile] = {
    "310P": AscendProfile(
        model="310P",
        aicore=8,
        aicpu=7,
        templates=_templates(
            ("vir01", 1, 1, 12, 12, 3),
            ("vir02", 2, 2, 25, 25, 6),
            ("vir02_1c", 2, 1, 25, 25, 6),
            ("vir04", 4, 4, 50, 50, 12),
            ("vir04_3c", 4, 3, 50, 50, 12),
            ("vir04_3c_ndvpp", 4, 3, 0, 50, 12),
            ("vir04_4c_dvpp", 4, 4, 100, 50, 12),
        ),
    ),
    "910B3": AscendProfile(
        model="910B3",
        aicore=20,
        aicpu=7,
        templates=_templates(
            ("vir05_1c_8g", 5, 1, 25, 12, 8),
            ("vir05_1c_16g", 5, 1, 25, 25, 16),
            ("vir10_3c_16g", 10, 3, 50, 25, 16),
            ("vir10_3c_32g", 10, 3, 50, 50, 32),
            ("vir10_4c_16g_m", 10, 4, 50, 25, 16),
        ),
    ),
}


def builtin_profile(model: str) -> AscendProfile | None:
    """The built-in profile for a model label such as "Ascend-310P3" or "910B3"."""
    for family in sorted(BUILTIN_PROFILES, key=len, reverse=True):
        if family in model:
            return BUILTIN_PROFILES[family]
    return None


def profile_with_overrides(
    model: str, config: Mapping[str, Mapping[str, Mapping[str, object]]] | None
) -> AscendProfile | None:
    """The node's profile, its templates replaced by a template ConfigMap's entry when present.

    `config` is the parsed ConfigMap data: "<vendor>-<model>" -> template name -> resources
    (`huawei.com/npu-core`, `npu-cpu`, `npu-dvpp`, `koordinator.sh/gpu-memory`, and optionally
    `koordinator.sh/gpu-memory-ratio`).
    """
    base = builtin_profile(model)
    entry = (config or {}).get(f"{n.VENDOR_HUAWEI}-{model}")
    if entry is None:
        return base
    templates = tuple(_template_from_resources(name, res) for name, res in sorted(entry.items()))
    aicore = base.aicore if base else max(t.aicore for t in templates)
    aicpu = base.aicpu if base else max(t.aicpu for t in templates)
    return AscendProfile(model=model, aicore=aicore, aicpu=aicpu, templates=templates)


def _template_from_resources(name: str, resources: Mapping[str, object]) -> VnpuTemplate:
    def amount(key: str) -> int:
        return to_int(resources.get(key, 0))

    return VnpuTemplate(
        name=name,
        aicore=amount(n.NPU_CORE),
        aicpu=amount(n.NPU_CPU),
        dvpp=amount(n.NPU_DVPP),
        memory_ratio=amount(n.GPU_MEMORY_RATIO),
        memory=amount(n.GPU_MEMORY),
    )


def match_npu_request(profile: AscendProfile, shape: NPUShape) -> VnpuTemplate | str:
    """The one template `shape` equals exactly, or Koordinator's reason when there is none."""
    matches = [
        t
        for t in profile.templates
        if t.aicore == shape.core
        and t.aicpu == shape.cpu
        and (t.dvpp or None) == shape.dvpp
        and t.memory == shape.memory
    ]
    if len(matches) == 1:
        return matches[0]
    return ERR_NO_MATCHED_TEMPLATE
