"""Amounts by their resource: memory in GiB, CPU in cores, whole devices in cards, device shares
in percent of a card, Ascend AI cores and AI CPUs counted, never in e-notation.

`quantity_text(resource, amount)` is the one function (the `quantity` template filter calls it);
`amount_in_unit` gives the number and unit apart for charts and tables that put the unit in a
heading. GPU monitoring's amounts are here too: GPU-hours, percents and idle durations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import timedelta

from koordweb.quantity import Unit, resource_unit
from scheduler.vocabulary import (
    AMD_GPU,
    CAMBRICON_MLU,
    CAMBRICON_MLU_VCORE,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    HUAWEI_NPU,
    KOORD_GPU,
    NPU_CORE,
    NPU_CPU,
    NPU_DVPP,
    NVIDIA_GPU,
    RDMA,
)

MILLI = 1000
GIB = 1024**3
MIB = 1024**2
# Resources whose amount is a number of whole cards.
WHOLE_DEVICES = {
    NVIDIA_GPU: "GPU",
    HUAWEI_NPU: "NPU",
    CAMBRICON_MLU: "MLU",
    AMD_GPU: "GPU",
    # Koordinator's count of cards a shared request spreads over (with a core or memory share).
    GPU_SHARED: "shared GPU",
}
# Resources whose amount is a percentage of one card (100 = a whole card).
CARD_SHARES = {
    # Koordinator's own GPU percentage: core and memory at once (200 = two whole cards).
    KOORD_GPU: "GPU",
    GPU_CORE: "GPU core",
    GPU_MEMORY_RATIO: "share of a GPU's memory",
    RDMA: "RDMA NIC",
    NPU_DVPP: "NPU media (DVPP) share",
    CAMBRICON_MLU_VCORE: "MLU core",
}
# Huawei's device plugin counts an Ascend card's compute units, not a percent of it (a 910B3
# has 20 AI cores and 7 AI CPUs): (unit, name).
NPU_UNITS = {NPU_CORE: ("AI cores", "NPU AI cores"), NPU_CPU: ("AI CPUs", "NPU AI CPUs")}
# Byte-sized device memory, named so that it never reads as the node's memory.
DEVICE_MEMORY = {GPU_MEMORY: "GPU memory"}
# Vendors by a resource's domain, to tell apart resources that read the same ("GPUs").
VENDOR_WORDS = {
    "nvidia.com": "NVIDIA",
    "amd.com": "AMD",
    "dcu.com": "Hygon",
    "koordinator.sh": "Koordinator",
}
# Display order in a pod shape: what people look at first.
LEADING = (NVIDIA_GPU, HUAWEI_NPU, NPU_CORE, CAMBRICON_MLU, GPU_CORE)


def number(value: float) -> str:
    """A number as people write it: thousands separated, at most one decimal, no exponent."""
    if abs(value - round(value)) < 0.05:
        return f"{round(value):,}"
    return f"{value:,.1f}"


def amount_in_unit(resource: str, amount: float) -> tuple[float, str]:
    """(value, unit) for a stored integer amount: (64.0, "cores"), (512.0, "GiB"), (8, "cards")."""
    if resource in WHOLE_DEVICES:
        return float(amount), "cards"
    if resource in CARD_SHARES:
        return float(amount), "% of a card"
    if resource in NPU_UNITS:
        return float(amount), NPU_UNITS[resource][0]
    unit = resource_unit(resource)
    if unit is Unit.MILLI:
        return round(amount / MILLI, 2), "cores"
    if unit is Unit.BYTES:
        return round(amount / GIB, 2), "GiB"
    if resource == "pods":
        return float(amount), "pods"
    return float(amount), ""


def quantity_text(resource: str, amount: float | None) -> str:
    """'64 cores', '512 GiB', '8 GPUs', '50% of a card (GPU core)', '1.5 cards of GPU core',
    '16 GiB of GPU memory', '25% of a GPU's memory', '2 GPUs' (koordinator.sh/gpu: 200), '2 shared
    GPUs' (koordinator.sh/gpu.shared: 2)."""
    if amount is None:
        return "—"
    if resource in WHOLE_DEVICES:
        kind = WHOLE_DEVICES[resource]
        return f"{number(amount)} {kind}{'' if amount == 1 else 's'}"
    if resource == KOORD_GPU:
        if amount >= 100:
            cards = amount / 100
            return f"{number(cards)} GPU{'' if cards == 1 else 's'}"
        return f"{number(amount)}% of a GPU"
    if resource == GPU_MEMORY_RATIO:
        if amount > 100:
            return f"the memory of {number(amount / 100)} GPUs"
        return f"{number(amount)}% of a GPU's memory"
    if resource == NPU_DVPP:
        if amount > 100:
            return f"the media engines (DVPP) of {number(amount / 100)} NPUs"
        return f"{number(amount)}% of an NPU's media engine (DVPP)"
    if resource in CARD_SHARES:
        kind = CARD_SHARES[resource]
        if amount > 100:
            return f"{number(amount / 100)} cards of {kind}"
        return f"{number(amount)}% of a card ({kind})"
    if resource in NPU_UNITS:
        unit_word = NPU_UNITS[resource][0]
        return f"{number(amount)} {unit_word[:-1] if amount == 1 else unit_word}"
    unit = resource_unit(resource)
    if unit is Unit.MILLI:
        return f"{number(amount / MILLI)} cores"
    if unit is Unit.BYTES:
        of = f" of {DEVICE_MEMORY[resource]}" if resource in DEVICE_MEMORY else ""
        if 0 < amount < GIB / 10:
            return f"{number(amount / MIB)} MiB{of}"
        return f"{number(amount / GIB)} GiB{of}"
    if resource == "pods":
        return f"{number(amount)} pods"
    return f"{number(amount)} {resource_name(resource)}"


def resource_name(resource: str) -> str:
    """A short name people say: 'GPUs' for nvidia.com/gpu, 'memory', 'GPU memory' for
    koordinator.sh/gpu-memory, else the last segment."""
    if resource in WHOLE_DEVICES:
        return f"{WHOLE_DEVICES[resource]}s"
    if resource in CARD_SHARES:
        return CARD_SHARES[resource]
    if resource in DEVICE_MEMORY:
        return DEVICE_MEMORY[resource]
    if resource in NPU_UNITS:
        return NPU_UNITS[resource][1]
    if resource == "cpu":
        return "CPU"
    return resource.rsplit("/", 1)[-1]


def resource_label(resource: str) -> str:
    """A resource as a heading or a choice names it, with its unit: 'GPUs', 'CPU (cores)',
    'Memory (GiB)', 'GPU memory (GiB)', 'Share of a GPU's memory (% of a card)'."""
    name = resource_name(resource)
    unit = amount_in_unit(resource, 0)[1]
    label = name if unit in ("", "cards", name) or unit in name else f"{name} ({unit})"
    return label[:1].upper() + label[1:]


def resource_choices(resources: Iterable[str]) -> list[tuple[str, str]]:
    """(key, label) pairs for a picker: the key is submitted, the label shown; resources that
    read the same ('GPUs' of NVIDIA and AMD) are told apart by their vendor."""
    labels = [(key, resource_label(key)) for key in resources]
    seen = Counter(label for _, label in labels)
    return [(key, label if seen[label] == 1 else _with_vendor(key, label)) for key, label in labels]


def _with_vendor(resource: str, label: str) -> str:
    domain = resource.split("/", 1)[0] if "/" in resource else ""
    return f"{label} ({VENDOR_WORDS.get(domain, domain or 'Kubernetes')})"


def shape_text(requests: Mapping[str, int]) -> str:
    """A pod's requests as people say them: '8 GPUs, 32 cores, 256 GiB'."""

    def order(name: str) -> tuple[int, str]:
        if name in LEADING:
            return (LEADING.index(name), name)
        return (len(LEADING) + (0 if name in ("cpu", "memory") else 1), name)

    shown = _device_words(requests)
    return ", ".join(
        shown.get(name) or quantity_text(name, requests[name])
        for name in sorted(requests, key=order)
        if shown.get(name, True) != ""
    )


# Koordinator's per-card shares a pod of whole cards carries beside its count (100 per card).
_PER_CARD_SHARES = (GPU_CORE, GPU_MEMORY_RATIO, KOORD_GPU)


def _device_words(requests: Mapping[str, int]) -> dict[str, str]:
    """Device shares said in the card's own word: beside a count of whole NPUs or MLUs, the
    GPU-named shares that only restate it are left out ("" = not shown), and any others read
    "of an NPU" ("the memory of 4 NPUs", never "of 4 GPUs")."""
    word = next(
        (WHOLE_DEVICES[r] for r in (HUAWEI_NPU, CAMBRICON_MLU, NVIDIA_GPU) if requests.get(r)), ""
    )
    if not word:
        return {}
    cards = next(
        int(requests[r]) for r in (HUAWEI_NPU, CAMBRICON_MLU, NVIDIA_GPU) if requests.get(r)
    )
    words: dict[str, str] = {}
    for name in _PER_CARD_SHARES:
        amount = requests.get(name)
        if not amount:
            continue
        if amount == 100 * cards:
            words[name] = ""
        elif word != "GPU":
            words[name] = device_share_text(name, amount, word)
    if requests.get(GPU_MEMORY) and word != "GPU":
        words[GPU_MEMORY] = f"{number(requests[GPU_MEMORY] / GIB)} GiB of {word} memory"
    return words


def device_share_text(resource: str, amount: float, word: str) -> str:
    """A GPU-named share of another kind of card, in that card's word: '50% of an NPU's
    memory', 'the memory of 4 NPUs', '50% of an MLU's compute'."""
    article = "an" if word[:1] in "AEINMU" else "a"
    what = "memory" if resource == GPU_MEMORY_RATIO else "compute"
    if amount > 100:
        return f"the {what} of {number(amount / 100)} {word}s"
    return f"{number(amount)}% of {article} {word}'s {what}"


def amounts_text(amounts: Mapping[str, int]) -> str:
    """Several resources' amounts in one phrase ('8 GPUs and 64 cores')."""
    parts = [quantity_text(name, amount) for name, amount in sorted(amounts.items())]
    if len(parts) > 1:
        return ", ".join(parts[:-1]) + " and " + parts[-1]
    return parts[0] if parts else "nothing"


def gpu_hours_text(hours: float) -> str:
    """'0.25 GPU-hours', '12.5 GPU-hours', '1,240 GPU-hours' (never e-notation)."""
    if hours >= 100:
        return f"{hours:,.0f} GPU-hours"
    if hours >= 10:
        return f"{hours:,.1f} GPU-hours"
    return f"{hours:.2f} GPU-hours"


def percent_text(value: float) -> str:
    """'42%': a percent rounded to a whole number."""
    return f"{value:.0f}%"


def duration_text(minutes: int) -> str:
    """'45 min', '5 h 12 min', '3 days 4 h'."""
    if minutes < 60:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} days {hours} h" if hours else f"{days} days"


# Whole-card resources whose cards a table counts, and the word for each.
CARD_COUNTS = {NVIDIA_GPU: "GPU", HUAWEI_NPU: "NPU", CAMBRICON_MLU: "MLU", AMD_GPU: "GPU"}


def cards_text(requests: Mapping[str, int], pods: int) -> str:
    """The cards a job asks for, all pods together, in its device's word: '16 GPUs', '8 NPUs',
    '1.5 shared GPUs' (a GPU core share); '—' for a job without accelerators."""
    for resource, word in CARD_COUNTS.items():
        if requests.get(resource):
            cards = int(requests[resource]) * pods
            return f"{number(cards)} {word}{'' if cards == 1 else 's'}"
    share = int(requests.get(GPU_CORE, 0) or requests.get(KOORD_GPU, 0))
    if share:
        shared = share * pods / 100
        return f"{number(shared)} shared GPU{'' if shared == 1 else 's'}"
    return "—"


def elapsed_text(elapsed: timedelta | None) -> str:
    """A wait or a run: '40 s', '12 min', '5 h 12 min', '3 days 4 h'; '—' when there is none."""
    if elapsed is None:
        return "—"
    seconds = max(0, int(elapsed.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    return duration_text(seconds // 60)
