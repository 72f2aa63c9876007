"""PostgreSQL array literals (`{1,2,"a \\"b\\""}`) written in one pass over plain values.

A list given to psycopg as a parameter is dumped element by element in Python (a dumper looked
up and called per element): at 5,000 elements that is tens of milliseconds a statement, more than
PostgreSQL takes to run it. One text literal, cast by the statement (`%s::bigint[]`), costs a
join. Elements are integers, strings (JSON text included), times, booleans, floats or None; any
other type is refused rather than guessed at.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal
from typing import Any


def array_literal(values: Iterable[Any]) -> str:
    """The array literal of `values`: NULL for None, every other element quoted and escaped."""
    return "{" + ",".join(_element(v) for v in values) + "}"


def int_array_literal(values: Iterable[int]) -> str:
    """The literal of an array of integers (ids): the common case, with nothing to quote."""
    return "{" + ",".join(str(int(v)) for v in values) + "}"


def _element(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        value = value.isoformat()
    if not isinstance(value, str):
        raise TypeError(f"no array literal for a {type(value).__name__}")
    # Inside double quotes only the backslash and the double quote need escaping.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
