"""Integer amounts from Kubernetes quantity strings found in device annotations and Device CRs.

The engine receives pod requests already in integer units, but the `device-allocated`
annotation, `gpu-partitions` tables and vNPU template ConfigMaps carry quantity strings ("16Gi",
"100"). The engine may not import koordweb's full parser, so this is the small exact subset those
documents use: an optional decimal fraction and a binary or decimal SI suffix, rounded up.

The arithmetic is on integers only (a decimal "1.5" is 15 tenths), exact as fractions would be
and several times faster: a 1,000-node snapshot parses thousands of these, mostly the same few
strings, which are remembered too.
"""

from __future__ import annotations

import re
from functools import lru_cache

_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE])?\s*$")
# Each suffix as a ratio of integers (numerator, denominator).
_SCALE: dict[str | None, tuple[int, int]] = {
    None: (1, 1),
    "m": (1, 1000),
    "k": (10**3, 1),
    "M": (10**6, 1),
    "G": (10**9, 1),
    "T": (10**12, 1),
    "P": (10**15, 1),
    "E": (10**18, 1),
    "Ki": (2**10, 1),
    "Mi": (2**20, 1),
    "Gi": (2**30, 1),
    "Ti": (2**40, 1),
    "Pi": (2**50, 1),
    "Ei": (2**60, 1),
}


def to_int(value: object) -> int:
    """`value` (an int, or a quantity string such as "16Gi") as a non-negative integer.

    Raises ValueError for anything else, including negative numbers and booleans.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"negative quantity: {value}")
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"not a quantity: {value!r}")
    return _parsed(value)


@lru_cache(maxsize=4096)
def _parsed(text: str) -> int:
    """A quantity string's amount, rounded up (errors are not remembered: they raise)."""
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"not a quantity: {text!r}")
    number, suffix = match.groups()
    whole, _, decimals = number.partition(".")
    numerator = int(whole + decimals or "0")  # ".5" -> 5, "1." -> 1
    denominator: int = 10 ** len(decimals)
    scale_up, scale_down = _SCALE[suffix]
    return -(-numerator * scale_up // (denominator * scale_down))  # ceiling division
