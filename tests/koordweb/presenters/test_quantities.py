"""Amounts by their resource: GiB, cores, cards, percent of a card; never e-notation."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from koordweb.presenters.quantities import (
    duration_text,
    gpu_hours_text,
    percent_text,
    quantity_text,
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
        ("koordinator.sh/gpu-memory", 42949672960, "40 GiB"),
        ("cpu", 64000, "64 cores"),
        ("cpu", 500, "0.5 cores"),
        ("cpu", 15_000_000, "15,000 cores"),
        ("nvidia.com/gpu", 8, "8 GPUs"),
        ("nvidia.com/gpu", 1, "1 GPU"),
        ("huawei.com/npu", 16, "16 NPUs"),
        ("koordinator.sh/gpu-core", 50, "50% of a card (GPU core)"),
        ("koordinator.sh/gpu-core", 800, "8 cards of GPU core"),
        ("koordinator.sh/gpu-memory-ratio", 25, "25% of a card (GPU memory)"),
        ("pods", 110, "110 pods"),
        ("example.com/widget", 3, "3 widget"),
        ("memory", None, "—"),
    ],
)
def test_quantity_text(resource: str, amount: int | None, text: str) -> None:
    assert quantity_text(resource, amount) == text
    assert "e+" not in text


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
