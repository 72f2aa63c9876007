"""Kubernetes resource quantities: exact parsing into the integer units koordweb stores, and back.

We store every amount as an integer: cpu-like resources in milli-units ("500m" -> 500, "2" ->
2000), byte-sized resources in bytes ("64Gi" -> 68719476736) and everything else as a plain count
("8" GPUs -> 8). Parsing follows the Kubernetes quantity grammar

    quantity ::= signedNumber suffix
    suffix   ::= binarySI (Ki Mi Gi Ti Pi Ei) | decimalSI (n u m "" k M G T P E)
               | decimalExponent ("e" or "E" followed by a signed integer)

with exact rational arithmetic, and rounds a fraction of the stored unit up, as Kubernetes does
for `MilliValue()` and `Value()`; an amount within int64 whose milli-units are not saturates at
2^63 - 1, as `MilliValue()` does. Negative amounts are refused: nothing koordweb models can be
negative. `format_quantity` writes the canonical string that parses back to the same integer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from enum import Enum
from fractions import Fraction
from typing import Any

# Kubernetes keeps quantities within int64; anything larger is a typo or an attack.
MAX_AMOUNT = 2**63 - 1
# Exponents this large already overflow MAX_AMOUNT (or round to the smallest unit): refuse them
# before building a 10**exponent that would cost time and memory.
_MAX_EXPONENT = 40
_MAX_LENGTH = 128

_NUMBER = r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
_SUFFIX = r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE](?P<exp>[+-]?[0-9]+))?"
_QUANTITY_RE = re.compile(rf"{_NUMBER}{_SUFFIX}")

_BINARY_SI = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class Unit(Enum):
    """The integer unit a resource is stored in."""

    MILLI = "milli"
    BYTES = "bytes"
    COUNT = "count"


# The last path segment of byte-sized resource names (`koordinator.sh/gpu-memory` -> gpu-memory).
_BYTE_SEGMENTS = {"memory", "storage", "ephemeral-storage", "gpu-memory", "vmemory"}


def resource_unit(resource: str) -> Unit:
    """The unit `resource` is stored in: cpu -> milli, memory-like -> bytes, else a count.

    Koordinator's `kubernetes.io/batch-cpu` and `mid-cpu` are already milli-core integers in
    Kubernetes, so they stay plain counts; `gpu-memory-ratio` is a percentage, also a count.
    """
    segment = resource.rsplit("/", 1)[-1]
    if segment == "cpu":
        return Unit.MILLI
    last_word = segment.rsplit(".", 1)[-1]  # cambricon.com/mlu.smlu.vmemory
    if (
        segment in _BYTE_SEGMENTS
        or last_word in _BYTE_SEGMENTS
        or segment.startswith("hugepages-")
        or segment.endswith("-memory")
    ):
        return Unit.BYTES
    return Unit.COUNT


class QuantityError(ValueError):
    """A quantity that is malformed, negative or out of range; names the field and the value."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}: invalid quantity {value!r}: {reason}")


def parse_exact(value: str, *, field: str = "quantity") -> Fraction:
    """The exact value of a quantity string, in the resource's base unit (cores, bytes, items)."""
    if len(value) > _MAX_LENGTH:
        raise QuantityError(field, value, f"longer than {_MAX_LENGTH} characters")
    match = _QUANTITY_RE.fullmatch(value)
    if match is None or not (match["int"] or match["frac"]):
        raise QuantityError(field, value, "not a Kubernetes quantity (e.g. 500m, 2, 1.5Gi, 2e3)")
    if match["sign"] == "-":
        raise QuantityError(field, value, "must not be negative")
    frac = match["frac"] or ""
    mantissa = Fraction(int((match["int"] or "0") + frac), 10 ** len(frac))
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SI:
        return mantissa * 1024 ** _BINARY_SI[suffix]
    exponent = int(match["exp"]) if match["exp"] is not None else _DECIMAL_SI[suffix]
    if abs(exponent) > _MAX_EXPONENT:
        raise QuantityError(field, value, "exponent out of range")
    return mantissa * Fraction(10) ** exponent


def parse_quantity(value: Any, *, field: str = "quantity", unit: Unit = Unit.COUNT) -> int:
    """Parse a quantity (a string, or a YAML int/float) into an integer amount of `unit`.

    A fraction of the unit rounds up: "0.1m" cpu -> 1 milli-core, "0.5" bytes -> 1 byte.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(field, value, "must be a string or a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(field, value, "must be finite")
    exact = parse_exact(value if isinstance(value, str) else repr(value), field=field)
    if math.ceil(exact) > MAX_AMOUNT:
        raise QuantityError(field, value, "too large (over 2^63 - 1)")
    if unit is Unit.MILLI:
        # Kubernetes' MilliValue saturates at MaxInt64 (`AsScaledInt64`): koord-scheduler's own
        # default and system quotas say MaxInt64/5 cores, beyond int64 in milli-cores.
        return min(math.ceil(exact * 1000), MAX_AMOUNT)
    return math.ceil(exact)


def parse_resource_quantity(resource: str, value: Any, *, field: str) -> int:
    """Parse the amount of one named resource into its stored unit."""
    return parse_quantity(value, field=field, unit=resource_unit(resource))


def parse_resource_list(resources: Any, *, field: str) -> dict[str, int]:
    """A Kubernetes ResourceList ({"cpu": "500m", ...}) -> integer amounts in stored units."""
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise QuantityError(field, resources, "must be a mapping of resource name to quantity")
    parsed: dict[str, int] = {}
    for name, value in resources.items():
        if not isinstance(name, str) or not name:
            raise QuantityError(field, name, "resource names must be non-empty strings")
        parsed[name] = parse_resource_quantity(name, value, field=f"{field}.{name}")
    return parsed


def format_quantity(amount: int, unit: Unit = Unit.COUNT) -> str:
    """The canonical string for an integer amount of `unit`; parses back to `amount` exactly.

    milli: whole units plainly ("2"), else with "m" ("500m"). bytes: the shortest exact form
    among plain, binary and decimal suffixes ("64Gi", "1T", "1500"), binary on a tie.
    counts: the plain integer, which reads best for device counts and percentages.
    """
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
        raise ValueError(f"amount must be a non-negative integer, got {amount!r}")
    if unit is Unit.MILLI:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if unit is Unit.BYTES and amount:
        # Kubernetes remembers whether a quantity was written 64Gi or 1T; we keep only the
        # number, so write whichever of the two exact forms is shorter (binary on a tie).
        candidates = [str(amount)]
        for suffix, power in _BINARY_SI.items():
            if amount % 1024**power == 0:
                candidates.append(f"{amount // 1024**power}{suffix}")
        for suffix in ("k", "M", "G", "T", "P", "E"):
            if amount % 10 ** _DECIMAL_SI[suffix] == 0:
                candidates.append(f"{amount // 10 ** _DECIMAL_SI[suffix]}{suffix}")
        return min(candidates, key=lambda text: (len(text), not text.endswith("i")))
    return str(amount)


def format_resource_quantity(resource: str, amount: int) -> str:
    """The canonical string for an amount of one named resource."""
    return format_quantity(amount, resource_unit(resource))


def format_resource_list(resources: Mapping[str, int]) -> dict[str, str]:
    """Integer amounts -> a Kubernetes ResourceList of canonical strings, keys sorted."""
    return {name: format_resource_quantity(name, resources[name]) for name in sorted(resources)}
