"""Many rows read as plain tuples, for the round's snapshot and its outbox.

`values_list` turns each JSON column of each row into Python with its own `json.loads`: a
snapshot of 5,000 pods decodes some 35,000 small documents, most of them the same few texts
(`{}`, the same requests, the same labels). `rows_read` runs the query the same way and decodes
each distinct JSON text once per call, so rows with equal JSON share one object: callers treat
these values as read-only (the snapshot copies what it keeps into the engine's objects).
Every other column goes through Django's own converters, so the tuples equal `values_list`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import Any, TypeVar, overload

from django.db.models import JSONField, QuerySet
from django.db.models.expressions import Col
from django.db.models.sql.constants import MULTI

Row = TypeVar("Row")


@overload
def rows_read(queryset: QuerySet[Any, Any]) -> list[tuple[Any, ...]]: ...


@overload
def rows_read(queryset: QuerySet[Any, Any], make: Callable[[Iterable[Any]], Row]) -> list[Row]: ...


def rows_read(
    queryset: QuerySet[Any, Any], make: Callable[[Iterable[Any]], Any] = tuple
) -> list[Any]:
    """The rows of a `values_list(...)` queryset, each made by `make` from its values (a tuple
    by default; a NamedTuple's `_make` for named rows). The values are converted column by
    column: a JSON column's distinct texts decoded once each."""
    compiler = queryset.query.get_compiler(using=queryset.db)
    results = compiler.execute_sql(MULTI)
    if results is None:
        return []
    fields = [s[0] for s in compiler.select[0 : compiler.col_count]]
    converters = compiler.get_converters(fields)
    connection = compiler.connection
    rows = list(chain.from_iterable(results))
    if not rows:
        return []
    if not converters:
        return list(map(make, rows))
    columns: list[Any] = list(zip(*rows, strict=True))
    for position, (convs, expression) in converters.items():
        field = getattr(expression, "output_field", None)
        if isinstance(field, JSONField) and isinstance(expression, Col):
            columns[position] = json_column(columns[position], field.decoder)
        else:
            columns[position] = converted_column(columns[position], convs, expression, connection)
    return list(map(make, zip(*columns, strict=True)))


def json_column(values: Sequence[Any], decoder: Any) -> list[Any]:
    """A JSON column's values decoded as `JSONField.from_db_value` does (texts by `json.loads`,
    anything else as it is), each distinct text once: rows with equal texts share one value."""
    try:
        distinct = set(values)
    except TypeError:  # values the driver decoded itself (unhashable): kept as they are
        return [_json_value(value, decoder) for value in values]
    decoded = {text: json.loads(text, cls=decoder) for text in distinct if isinstance(text, str)}
    return list(map(decoded.get, values, values))


def _json_value(value: Any, decoder: Any) -> Any:
    """One value of a JSON column: a text decoded, anything else kept."""
    if value is None or not isinstance(value, str):
        return value
    return json.loads(value, cls=decoder)


def converted_column(
    values: Sequence[Any], convs: list[Any], expression: Any, connection: Any
) -> list[Any]:
    """A column's values through Django's converters for it, in order."""
    out = list(values)
    for converter in convs:
        out = [converter(value, expression, connection) for value in out]
    return out
