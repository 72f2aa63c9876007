"""How many rows of each model deleting some rows would take with them, counted in the database.

Django's collector finds what a deletion cascades to by loading every row (for a cluster, every
node, pod, job, decision and intent); an admin asking "what would go" needs only the counts. Each
model reached through `on_delete=CASCADE` relations is counted once, by one query: the rows whose
path to the deleted rows goes through any of the cascading relations that lead to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import models
from django.db.models import Q

from koordweb.models.deletion import cascade_paths


def cascade_counts(model: type[models.Model], rows: Sequence[models.Model]) -> dict[Any, int]:
    """Model -> rows that deleting `rows` (of `model`) deletes, the rows themselves included."""
    paths, _ = cascade_paths(model)
    counts: dict[Any, int] = {model: len(rows)}
    for related, lookups in paths.items():
        reached = Q()
        for lookup in lookups:
            reached |= Q(**{f"{lookup}__in": rows})
        counts[related] = related._default_manager.filter(reached).distinct().count()
    return counts
