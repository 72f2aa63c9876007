"""`__any`: membership in a list of ids sent as one array, for lists that reach thousands.

`filter(id__in=ids)` makes one placeholder per id: with 5,000 ids Django and psycopg spend tens of
milliseconds building, quoting and splitting the statement, and PostgreSQL parsing it. On
PostgreSQL `filter(id__any=ids)` is `id = ANY(%s)` with the list as one parameter, an array
literal (`rows.arrays`: psycopg would dump a list element by element); on SQLite the list is one
JSON array read with json_each. Registered on integer columns (primary keys, and foreign keys
through `job__id__any`, which Django resolves to the `job_id` column without a join).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db.models import IntegerField, Lookup

from koordweb.rows.arrays import int_array_literal


class AnyOf(Lookup):
    lookup_name = "any"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        sql, param = id_list_sql(connection, lhs, self.rhs)
        return sql, (*lhs_params, param)


def id_list_sql(connection: Any, column: str, ids: Iterable[int]) -> tuple[str, str]:
    """`column` is one of `ids`, as SQL with one parameter: a PostgreSQL array literal, or on
    SQLite a JSON array read with json_each (one placeholder per id would stop at SQLite's
    32,766 variables, and a round can bind more pods than that)."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s::bigint[])", int_array_literal(ids)
    return f"{column} IN (SELECT value FROM json_each(%s))", json.dumps([int(v) for v in ids])


def register() -> None:
    IntegerField.register_lookup(AnyOf)
