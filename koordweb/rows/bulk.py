"""Many rows at once, in the fewest statements: the round's hot path writes thousands a round.

Django's bulk_update builds CASE expressions, and bulk_create builds a model instance per row:
both cost seconds of Python at 5,000 rows. These write plain values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Field, Model

CHUNK = 1000


def rows_update(model: type[Model], rows: list[Any], fields: list[str]) -> None:
    """Write `fields` of many model instances: on PostgreSQL one UPDATE ... FROM unnest(arrays)
    per CHUNK rows (a short statement, one array per column), elsewhere one prepared UPDATE run
    for each row."""
    if not rows:
        return
    columns = _columns(model, fields)
    values = [
        [c.get_db_prep_save(getattr(row, c.attname), connection) for c in columns] for row in rows
    ]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    names = [quote(c.column or c.name) for c in columns]
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            assignments = ", ".join(f"{n} = %s" for n in names)
            params = [[*v, row.pk] for v, row in zip(values, rows, strict=True)]
            cursor.executemany(f"UPDATE {table} SET {assignments} WHERE id = %s", params)
            return
        arrays = ", ".join(f"%s::{c.db_type(connection)}[]" for c in columns)
        assignments = ", ".join(f"{n} = v.{n}" for n in names)
        sql = (
            f"UPDATE {table} SET {assignments} FROM unnest({arrays}, %s::bigint[]) "
            f"AS v({', '.join(names)}, id) WHERE {table}.id = v.id"
        )
        for start in range(0, len(rows), CHUNK):
            chunk = values[start : start + CHUNK]
            ids = [row.pk for row in rows[start : start + CHUNK]]
            cursor.execute(sql, [*[list(col) for col in zip(*chunk, strict=True)], ids])


def rows_insert(model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Insert rows given as plain values in `fields` order (JSON fields as Python values):
    on PostgreSQL INSERT ... SELECT FROM unnest(arrays) per CHUNK rows, elsewhere executemany."""
    if not rows:
        return
    columns = _columns(model, fields)
    values = [
        [c.get_db_prep_save(value, connection) for c, value in zip(columns, row, strict=True)]
        for row in rows
    ]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    names = ", ".join(quote(c.column or c.name) for c in columns)
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            marks = ", ".join(["%s"] * len(columns))
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", values)
            return
        arrays = ", ".join(f"%s::{c.db_type(connection)}[]" for c in columns)
        sql = f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})"
        for start in range(0, len(values), CHUNK):
            chunk = values[start : start + CHUNK]
            cursor.execute(sql, [list(col) for col in zip(*chunk, strict=True)])


def _columns(model: type[Model], fields: Sequence[str]) -> list[Field[Any, Any]]:
    return [field for name in fields if isinstance(field := model._meta.get_field(name), Field)]
