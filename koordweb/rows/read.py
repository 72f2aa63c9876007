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
from collections.abc import Callable
from itertools import chain
from typing import Any

from django.db.models import JSONField, QuerySet
from django.db.models.expressions import Col
from django.db.models.sql.constants import MULTI


def rows_read(queryset: QuerySet[Any, Any]) -> list[tuple[Any, ...]]:
    """The rows of a `values_list(...)` queryset, as tuples."""
    compiler = queryset.query.get_compiler(using=queryset.db)
    results = compiler.execute_sql(MULTI)
    if results is None:
        return []
    fields = [s[0] for s in compiler.select[0 : compiler.col_count]]
    converters = compiler.get_converters(fields)
    connection = compiler.connection
    steps: list[tuple[int, Callable[[Any], Any]]] = []
    for position, (convs, expression) in converters.items():
        field = getattr(expression, "output_field", None)
        if isinstance(field, JSONField) and isinstance(expression, Col):
            steps.append((position, _json_once(field)))
        else:
            steps.append((position, _converted(convs, expression, connection)))
    rows = chain.from_iterable(results)
    if not steps:
        return [tuple(row) for row in rows]
    out: list[tuple[Any, ...]] = []
    for row in rows:
        values = list(row)
        for position, convert in steps:
            values[position] = convert(values[position])
        out.append(tuple(values))
    return out


def _json_once(field: JSONField) -> Callable[[Any], Any]:
    seen: dict[str, Any] = {}
    decoder = field.decoder

    def decode(text: Any) -> Any:
        if text is None or not isinstance(text, str):
            return text
        value = seen.get(text, seen)
        if value is seen:
            value = seen[text] = json.loads(text, cls=decoder)
        return value

    return decode


def _converted(convs: list[Any], expression: Any, connection: Any) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        for converter in convs:
            value = converter(value, expression, connection)
        return value

    return convert
