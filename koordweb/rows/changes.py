"""The change position a warm snapshot reads (migrations 0008 and 0017), set by the bulk writers
themselves on PostgreSQL: the table's trigger then skips its PL/pgSQL call for each row, which
cost about a fifth of binding 5,000 pods. Leaving it out is never wrong, only slower: the trigger
sets the position of any update that did not set it to the writing transaction's id."""

from __future__ import annotations

from django.db import connection
from django.db.models import Model

# The tables whose rows carry a change position (migration 0008).
TRACKED = frozenset(
    ("koordweb_node", "koordweb_pod", "koordweb_job", "koordweb_nodemetric", "koordweb_device")
)


def change_position_set(model: type[Model]) -> str:
    """The assignment to add to an UPDATE's SET list of `model`'s table ("" where none is due)."""
    if connection.vendor != "postgresql" or model._meta.db_table not in TRACKED:
        return ""
    return ", change_seq = pg_current_xact_id()::text::bigint"
