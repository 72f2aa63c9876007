"""`__any`: membership in a list of ids sent as one array, for lists that reach thousands.

`filter(id__in=ids)` makes one placeholder per id: with 5,000 ids Django and psycopg spend tens of
milliseconds building, quoting and splitting the statement, and PostgreSQL parsing it. On
PostgreSQL `filter(id__any=ids)` is `id = ANY(%s)` with the list as one parameter, an array
literal (`rows.arrays`: psycopg would dump a list element by element); elsewhere it is
the same IN as `__in`. Registered on integer columns (primary keys, and foreign keys through
`job__id__any`, which Django resolves to the `job_id` column without a join).
"""

from __future__ import annotations

from typing import Any

from django.db.models import IntegerField, Lookup
from django.db.models.lookups import In

from koordweb.rows.arrays import int_array_literal


class AnyOf(Lookup):
    lookup_name = "any"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        if connection.vendor != "postgresql":
            return In(self.lhs, [int(v) for v in self.rhs]).as_sql(compiler, connection)
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s::bigint[])", (*lhs_params, int_array_literal(self.rhs))


def register() -> None:
    IntegerField.register_lookup(AnyOf)
