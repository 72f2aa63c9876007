"""Huawei Ascend NPUs: card profiles, built-in vNPU templates, ConfigMap overrides, matching.

A vNPU request (`huawei.com/npu-core`, optionally `npu-cpu` and `npu-dvpp`) must match exactly one
template of the card's model; one vNPU lives on one card. A request for a multiple of a card's AI
cores with no template of that size is a request for whole cards. The built-in templates follow
the Ascend virtualization tables (310P: 8 AI cores, 7 AI CPUs; 910B3: 20 AI cores, 7 AI CPUs,
64 GB), with DVPP and memory as percentages of the card.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.devices import names as n
from scheduler.devices.model import AscendProfile, VnpuTemplate
from scheduler.devices.quantity import to_int
from scheduler.devices.request import NPUShape


def _templates(*rows: tuple[str, int, int, int, int]) -> tuple[VnpuTemplate, ...]:
    return tuple(
        VnpuTemplate(name, core, cpu, dvpp, ratio) for name, core, cpu, dvpp, ratio in rows
    )


BUILTIN_PROFILES: Mapping[str, AscendProfile] = {
    "310P": AscendProfile(
        model="310P",
        aicore=8,
        aicpu=7,
        templates=_templates(
            ("vir01", 1, 1, 12, 12),
            ("vir02", 2, 2, 25, 25),
            ("vir02_1c", 2, 1, 25, 25),
            ("vir04", 4, 4, 50, 50),
            ("vir04_3c", 4, 3, 50, 50),
            ("vir04_3c_ndvpp", 4, 3, 0, 50),
            ("vir04_4c_dvpp", 4, 4, 100, 50),
        ),
    ),
    "910B3": AscendProfile(
        model="910B3",
        aicore=20,
        aicpu=7,
        templates=_templates(
            ("vir05_1c_8g", 5, 1, 25, 12),
            ("vir05_1c_16g", 5, 1, 25, 25),
            ("vir10_3c_16g", 10, 3, 50, 25),
            ("vir10_3c_32g", 10, 3, 50, 50),
            ("vir10_4c_16g_m", 10, 4, 50, 25),
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
    (`huawei.com/npu-core`, `npu-cpu`, `npu-dvpp`, `koordinator.sh/gpu-memory-ratio`).
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
    )


def match_npu_request(profile: AscendProfile, shape: NPUShape) -> VnpuTemplate | int | str:
    """The one template `shape` matches, a number of whole cards, or why it matches nothing."""
    matches = [
        t
        for t in profile.templates
        if t.aicore == shape.core
        and (shape.cpu is None or t.aicpu == shape.cpu)
        and (shape.dvpp is None or t.dvpp == shape.dvpp)
    ]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        names = ", ".join(t.name for t in matches)
        return (
            f"{n.NPU_CORE}={shape.core} matches {len(matches)} vNPU templates of {profile.model}"
            f" ({names}); add {n.NPU_CPU} or {n.NPU_DVPP} to pick one"
        )
    if shape.core % profile.aicore == 0 and shape.dvpp in (None, n.FULL):
        cards = shape.core // profile.aicore
        if shape.cpu is None or shape.cpu == cards * profile.aicpu:
            return cards
    return f"no vNPU template of {profile.model} has {_describe(shape)}"


def _describe(shape: NPUShape) -> str:
    parts = [f"{n.NPU_CORE}={shape.core}"]
    if shape.cpu is not None:
        parts.append(f"{n.NPU_CPU}={shape.cpu}")
    if shape.dvpp is not None:
        parts.append(f"{n.NPU_DVPP}={shape.dvpp}")
    return ", ".join(parts)
