"""Amounts by their resource: GiB, cores, cards, percent of a card; never e-notation."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from koordweb.presenters.quantities import (
    duration_text,
    gpu_hours_text,
    percent_text,
    quantity_text,
    resource_choices,
    resource_label,
    resource_name,
    shape_text,
)

GIB = 1024**3


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("memory", 512 * GIB, "512 GiB"),
        ("memory", 1536 * 1024**2, "1.5 GiB"),
        ("memory", 64 * 1024**2, "64 MiB"),
        ("cambricon.com/mlu.smlu.vmemory", 8589934592, "8 GiB"),
        ("koordinator.sh/gpu-memory", 42949672960, "40 GiB of GPU memory"),
        ("koordinator.sh/gpu-memory", 512 * 1024**2, "0.5 GiB of GPU memory"),
        ("cpu", 64000, "64 cores"),
        ("cpu", 500, "0.5 cores"),
        ("cpu", 15_000_000, "15,000 cores"),
        ("nvidia.com/gpu", 8, "8 GPUs"),
        ("nvidia.com/gpu", 1, "1 GPU"),
        ("huawei.com/npu", 16, "16 NPUs"),
        ("koordinator.sh/gpu-core", 50, "50% of a card (GPU core)"),
        ("koordinator.sh/gpu-core", 800, "8 cards of GPU core"),
        ("koordinator.sh/gpu-memory-ratio", 25, "25% of a GPU's memory"),
        ("koordinator.sh/gpu-memory-ratio", 200, "the memory of 2 GPUs"),
        # Koordinator's own GPU percentage (core and memory at once), and the count of cards a
        # shared request spreads over: not to be read the other way round.
        ("koordinator.sh/gpu", 200, "2 GPUs"),
        ("koordinator.sh/gpu", 100, "1 GPU"),
        ("koordinator.sh/gpu", 50, "50% of a GPU"),
        ("koordinator.sh/gpu.shared", 1, "1 shared GPU"),
        ("koordinator.sh/gpu.shared", 2, "2 shared GPUs"),
        ("pods", 110, "110 pods"),
        ("example.com/widget", 3, "3 widget"),
        ("memory", None, "—"),
    ],
)
def test_quantity_text(resource: str, amount: int | None, text: str) -> None:
    assert quantity_text(resource, amount) == text
    assert "e+" not in text


def test_the_two_gpu_memory_shares_read_apart() -> None:
    """Bytes of GPU memory and a percent of a card's memory are different requests: their
    names, labels and amounts never read the same, and never as the node's memory."""
    gib, ratio = "koordinator.sh/gpu-memory", "koordinator.sh/gpu-memory-ratio"
    assert resource_name(gib) == "GPU memory"
    assert resource_name(ratio) == "share of a GPU's memory"
    assert resource_label(gib) == "GPU memory (GiB)"
    assert resource_label(ratio) == "Share of a GPU's memory (% of a card)"
    assert quantity_text(gib, 16 * GIB) != quantity_text("memory", 16 * GIB)
    assert "gpu-memory" not in resource_name(gib) + resource_label(gib) + resource_label(ratio)
    shape = {"koordinator.sh/gpu-core": 50, gib: 16 * GIB, ratio: 50, "memory": 16 * GIB}
    assert shape_text(shape) == (
        "50% of a card (GPU core), 16 GiB, 16 GiB of GPU memory, 50% of a GPU's memory"
    )


@pytest.mark.parametrize(
    ("resource", "label"),
    [
        ("nvidia.com/gpu", "GPUs"),
        ("cpu", "CPU (cores)"),
        ("memory", "Memory (GiB)"),
        ("pods", "Pods"),
        ("koordinator.sh/gpu-core", "GPU core (% of a card)"),
        ("huawei.com/npu", "NPUs"),
    ],
)
def test_resource_label_is_a_word_with_its_unit(resource: str, label: str) -> None:
    assert resource_label(resource) == label


def test_resource_choices_keep_keys_and_tell_apart_same_words() -> None:
    choices = resource_choices(["amd.com/gpu", "cpu", "nvidia.com/gpu"])
    assert choices == [
        ("amd.com/gpu", "GPUs (AMD)"),
        ("cpu", "CPU (cores)"),
        ("nvidia.com/gpu", "GPUs (NVIDIA)"),
    ]


def test_shape_text_puts_accelerators_first() -> None:
    shape = {"memory": 256 * GIB, "cpu": 32000, "nvidia.com/gpu": 8}
    assert shape_text(shape) == "8 GPUs, 32 cores, 256 GiB"


def test_the_template_filter_is_the_same_function() -> None:
    template = Template('{% load koordweb_ui %}{{ amount|quantity:"memory" }}')
    assert template.render(Context({"amount": 4.29497e10})) == "40 GiB"


@pytest.mark.parametrize(
    ("hours", "text"),
    [(0.25, "0.25 GPU-hours"), (12.46, "12.5 GPU-hours"), (1240.4, "1,240 GPU-hours")],
)
def test_gpu_hours_text(hours: float, text: str) -> None:
    assert gpu_hours_text(hours) == text


@pytest.mark.parametrize(
    ("minutes", "text"),
    [
        (45, "45 min"),
        (60, "1 h"),
        (312, "5 h 12 min"),
        (48 * 60, "2 days"),
        (76 * 60, "3 days 4 h"),
    ],
)
def test_duration_text(minutes: int, text: str) -> None:
    assert duration_text(minutes) == text


def test_percent_text_rounds_to_a_whole_percent() -> None:
    assert percent_text(42.4) == "42%"
    assert percent_text(99.6) == "100%"
