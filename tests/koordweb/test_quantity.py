"""Quantities: exact parsing by the Kubernetes grammar, rounding up, canonical formatting."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordweb.quantity import (
    QuantityError,
    Unit,
    format_quantity,
    format_resource_list,
    parse_quantity,
    parse_resource_list,
    resource_unit,
)

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
small = settings(max_examples=150, deadline=None)


@pytest.mark.parametrize(
    ("text", "unit", "expected"),
    [
        ("500m", Unit.MILLI, 500),
        ("1.5", Unit.MILLI, 1500),
        ("2e3", Unit.MILLI, 2_000_000),
        ("0.1m", Unit.MILLI, 1),  # rounds up, as MilliValue() does
        ("100k", Unit.COUNT, 100_000),
        ("1E", Unit.COUNT, 10**18),
        ("1E3", Unit.COUNT, 1000),
        ("0.5Mi", Unit.BYTES, 512 * 1024),
        ("64Gi", Unit.BYTES, 64 * 2**30),
        ("1.5", Unit.BYTES, 2),
        ("+5", Unit.COUNT, 5),
        (".5", Unit.MILLI, 500),
        ("5.", Unit.COUNT, 5),
        ("1e-3", Unit.MILLI, 1),
        (3, Unit.MILLI, 3000),
        (0.25, Unit.MILLI, 250),
        ("0", Unit.BYTES, 0),
    ],
)
def test_examples(text, unit, expected):
    assert parse_quantity(text, unit=unit) == expected


@pytest.mark.parametrize(
    "text",
    ["", ".", "1.5x", "1e", "1Ki3", "Gi", "1 Gi", "1.2.3", "0x10", "1ki", "--1", "1E+", "1e1.5"],
)
def test_malformed_raises_naming_field_and_value(text):
    with pytest.raises(QuantityError) as caught:
        parse_quantity(text, field="spec.cpu")
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(f"spec.cpu: invalid quantity {text!r}")


@pytest.mark.parametrize(
    "value", ["-1", "-0.5Gi", -3, True, None, float("nan"), "1e99", "99Ei" * 1, "9" * 200]
)
def test_negative_nonsense_and_huge_are_refused(value):
    with pytest.raises(QuantityError):
        parse_quantity(value, unit=Unit.BYTES)


def test_resource_units():
    assert resource_unit("cpu") is Unit.MILLI
    for name in (
        "memory",
        "ephemeral-storage",
        "koordinator.sh/gpu-memory",
        "hugepages-1Gi",
        "cambricon.com/mlu.smlu.vmemory",
        "kubernetes.io/batch-memory",
        "storage",
    ):
        assert resource_unit(name) is Unit.BYTES, name
    for name in (
        "nvidia.com/gpu",
        "koordinator.sh/gpu-memory-ratio",
        "koordinator.sh/gpu-core",
        "kubernetes.io/batch-cpu",
        "pods",
        "huawei.com/npu-core",
    ):
        assert resource_unit(name) is Unit.COUNT, name


def test_resource_lists():
    parsed = parse_resource_list({"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": 2}, field="r")
    assert parsed == {"cpu": 250, "memory": 2**30, "nvidia.com/gpu": 2}
    assert format_resource_list(parsed) == {"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": "2"}
    with pytest.raises(QuantityError, match=r"^r\.memory: invalid quantity '1Gb'"):
        parse_resource_list({"memory": "1Gb"}, field="r")


# The grammar, generated piece by piece; the expected value is computed from the pieces, not
# from the text, so the parser is checked against an independent reading.
digits = st.text("0123456789", min_size=0, max_size=12)
suffixes = st.one_of(
    st.sampled_from(sorted(BINARY)).map(lambda s: (s, Fraction(BINARY[s]))),
    st.sampled_from(sorted(DECIMAL)).map(lambda s: (s, Fraction(10) ** DECIMAL[s])),
    st.tuples(st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), st.integers(0, 12)).map(
        lambda t: (f"{t[0]}{t[1]}{t[2]}", Fraction(10) ** (-t[2] if t[1] == "-" else t[2]))
    ),
)


@st.composite
def quantities(draw):
    whole, frac = draw(digits), draw(digits)
    if not whole and not frac:
        whole = "0"
    dot = draw(st.booleans()) or bool(frac)
    sign = draw(st.sampled_from(["", "+"]))
    suffix, multiplier = draw(suffixes)
    text = f"{sign}{whole}{'.' if dot else ''}{frac}{suffix}"
    value = (int(whole or "0") + Fraction(int(frac or "0"), 10 ** len(frac))) * multiplier
    return text, value


@small
@given(quantities(), st.sampled_from(list(Unit)))
def test_grammar_parses_exactly_and_rounds_up(case, unit):
    text, value = case
    if math.ceil(value) > 2**63 - 1:  # beyond int64 in its own unit: refused
        with pytest.raises(QuantityError):
            parse_quantity(text, unit=unit)
        return
    scaled = value * 1000 if unit is Unit.MILLI else value
    # milli-units beyond int64 saturate, as Kubernetes' MilliValue does (koord-scheduler's own
    # quotas say MaxInt64/5 cores)
    assert parse_quantity(text, unit=unit) == min(math.ceil(scaled), 2**63 - 1)


@small
@given(st.integers(0, 2**63 - 1), st.sampled_from(list(Unit)))
def test_format_parses_back_exactly(amount, unit):
    text = format_quantity(amount, unit)
    assert parse_quantity(text, unit=unit) == amount
    assert format_quantity(parse_quantity(text, unit=unit), unit) == text  # canonical


@small
@given(quantities())
def test_negated_quantities_are_refused(case):
    text, _ = case
    with pytest.raises(QuantityError, match="must not be negative"):
        parse_quantity("-" + text.lstrip("+"))


@small
@given(st.text(max_size=12))
def test_arbitrary_text_parses_or_raises_quantity_error(text):
    try:
        assert parse_quantity(text, unit=Unit.BYTES) >= 0
    except QuantityError as error:
        assert repr(text) in str(error)
