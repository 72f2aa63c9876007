"""Integer amounts from Kubernetes quantity strings found in device annotations and Device CRs.

The engine receives pod requests already in integer units, but the `device-allocated`
annotation, `gpu-partitions` tables and vNPU template ConfigMaps carry quantity strings ("16Gi",
"100"). The engine may not import koordweb's full parser, so this is the small exact subset those
documents use: an optional decimal fraction and a binary or decimal SI suffix, rounded up.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE])?\s*$")
_SCALE = {
    None: Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
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
    match = _QUANTITY.match(value)
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = match.groups()
    return math.ceil(Fraction(number) * _SCALE[suffix])
