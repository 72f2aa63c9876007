"""Many rows at once, in the fewest statements: the round's hot path writes thousands a round.

Django's bulk_update builds CASE expressions, bulk_create builds a model instance per row, and
psycopg dumps every element of a list parameter in Python: each costs seconds at 5,000 rows.
These write plain values. On PostgreSQL they go through a server-side-binding cursor of the same
connection (so the same transaction): inserts with COPY, updates as one UPDATE ... FROM
unnest(arrays) per chunk, each array sent as one text literal (`rows.arrays`); elsewhere (SQLite)
one prepared statement run for each row.

Values are given in `fields` order as Python values (foreign keys as ids, JSON fields as Python
objects, choices as their values).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from django.db import connection
from django.db.models import Field, JSONField, Model

from koordweb.rows.arrays import array_literal, int_array_literal
from koordweb.rows.changes import change_position_set

CHUNK = 5000


def rows_update(model: type[Model], rows: Sequence[Model], fields: Sequence[str]) -> None:
    """Write `fields` of many model instances (see `rows_write`)."""
    columns = _columns(model, fields)
    rows_write(
        model,
        fields,
        [(row.pk, *(getattr(row, c.attname) for c in columns)) for row in rows],
    )


def rows_write(model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Set `fields` of many rows given as plain values: (primary key, *values in `fields`
    order)."""
    if not rows:
        return
    columns = _columns(model, fields)
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    names = [quote(c.column or c.name) for c in columns]
    if connection.vendor != "postgresql":
        assignments = ", ".join(f"{n} = %s" for n in names)
        params = [
            [
                *(c.get_db_prep_save(v, connection) for c, v in zip(columns, row[1:], strict=True)),
                row[0],
            ]
            for row in rows
        ]
        with connection.cursor() as cursor:
            cursor.executemany(f"UPDATE {table} SET {assignments} WHERE id = %s", params)
        return
    arrays = ", ".join(f"%s::{c.db_type(connection)}[]" for c in columns)
    assignments = ", ".join(f"{n} = v.{n}" for n in names) + change_position_set(model)
    sql = (
        f"UPDATE {table} SET {assignments} FROM unnest({arrays}, %s::bigint[]) "
        f"AS v({', '.join(names)}, id) WHERE {table}.id = v.id"
    )
    prepare = [_plain(c) for c in columns]
    with _server_cursor() as cursor:
        for start in range(0, len(rows), CHUNK):
            chunk = rows[start : start + CHUNK]
            arrays_of = [
                array_literal(prep(row[i + 1]) for row in chunk) for i, prep in enumerate(prepare)
            ]
            cursor.execute(sql, [*arrays_of, int_array_literal(row[0] for row in chunk)])


def rows_insert(model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Insert rows given as plain values in `fields` order: COPY on PostgreSQL, executemany
    elsewhere."""
    _insert(model, fields, rows, ids=False)


def rows_insert_ids(
    model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[Any]]
) -> list[int]:
    """`rows_insert`, returning the new rows' ids in `rows` order: on PostgreSQL taken from the
    table's id sequence in one statement (ascending) and copied in with the rows; elsewhere each
    row is inserted on its own and its id read back."""
    return _insert(model, fields, rows, ids=True)


def _insert(
    model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[Any]], ids: bool
) -> list[int]:
    if not rows:
        return []
    columns = _columns(model, fields)
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"{len(row)} values for {len(columns)} columns")
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    names = ", ".join(quote(c.column or c.name) for c in columns)
    if connection.vendor != "postgresql":
        marks = ", ".join(["%s"] * len(columns))
        sql = f"INSERT INTO {table} ({names}) VALUES ({marks})"
        values = [
            [c.get_db_prep_save(v, connection) for c, v in zip(columns, row, strict=True)]
            for row in rows
        ]
        with connection.cursor() as django_cursor:
            if not ids:
                django_cursor.executemany(sql, values)
                return []
            given = []
            for row_values in values:
                django_cursor.execute(sql, row_values)
                given.append(int(django_cursor.lastrowid))
            return given
    # Only JSON and choice columns need converting: the others go to psycopg as they are.
    converted = [(i, _plain(c)) for i, c in enumerate(columns) if _converts(c)]
    new_ids: list[int] = []
    if ids:
        with _server_cursor() as cursor:
            # The sequence looked up once: inside the statement below it was looked up for every
            # row (13 ms for 5,000 ids, against 3).
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [model._meta.db_table])
            sequence = cursor.fetchone()[0]  # type: ignore[index]
            cursor.execute(
                "SELECT nextval(%s::regclass) FROM generate_series(1, %s)", [sequence, len(rows)]
            )
            new_ids = sorted(row[0] for row in cursor.fetchall())
        names = f"{quote(model._meta.pk.column or 'id')}, {names}"
        converted = [(i + 1, prep) for i, prep in converted]
        rows = [(pk, *row) for pk, row in zip(new_ids, rows, strict=True)]
    with _server_cursor() as server, server.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            values = list(row)
            for i, prep in converted:
                values[i] = prep(values[i])
            copy.write_row(values)
    return new_ids


def rows_set(model: type[Model], ids: Sequence[int], **values: Any) -> int:
    """Set the same `values` on the rows `ids` (one statement with the ids as one array
    parameter on PostgreSQL; a Django IN list elsewhere). Returns how many rows changed."""
    if not ids:
        return 0
    if connection.vendor != "postgresql":
        return model._default_manager.filter(pk__in=list(ids)).update(**values)
    columns = _columns(model, list(values))
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(c.column or c.name)} = %s" for c in columns)
    assignments += change_position_set(model)
    params = [_plain(c)(values[c.name]) for c in columns]
    sql = f"UPDATE {quote(model._meta.db_table)} SET {assignments} WHERE id = ANY(%s::bigint[])"
    with _server_cursor() as cursor:
        cursor.execute(sql, [*params, int_array_literal(ids)])
        return cursor.rowcount


def rows_delete(model: type[Model], ids: Sequence[int]) -> int:
    """Delete the rows `ids` of a model nothing refers to (no cascade is looked for): one
    statement with the ids as one array parameter on PostgreSQL. Returns how many went."""
    if not ids:
        return 0
    if connection.vendor != "postgresql":
        return model._default_manager.filter(pk__in=list(ids))._raw_delete(connection.alias)
    table = connection.ops.quote_name(model._meta.db_table)
    with _server_cursor() as cursor:
        sql = f"DELETE FROM {table} WHERE id = ANY(%s::bigint[])"
        cursor.execute(sql, [int_array_literal(ids)])
        return cursor.rowcount


def _server_cursor() -> psycopg.Cursor[Any]:
    """A cursor binding parameters on the server, on Django's connection (its transaction)."""
    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)


def _plain(column: Field[Any, Any]) -> Callable[[Any], Any]:
    """How a Python value of `column` goes to psycopg: JSON as text, choices as their value."""
    if isinstance(column, JSONField):
        encoder = column.encoder

        def as_json(value: Any) -> Any:
            return None if value is None else json.dumps(value, cls=encoder)

        return as_json
    return _plain_value


def _converts(column: Field[Any, Any]) -> bool:
    """Whether `_plain` changes values of `column` (JSON to text, choices to their value)."""
    return isinstance(column, JSONField) or bool(column.choices)


def _plain_value(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _columns(model: type[Model], fields: Sequence[str]) -> list[Field[Any, Any]]:
    return [field for name in fields if isinstance(field := model._meta.get_field(name), Field)]
