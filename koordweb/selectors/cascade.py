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

MAX_DEPTH = 5  # relation hops followed from the deleted rows


def cascade_counts(model: type[models.Model], rows: Sequence[models.Model]) -> dict[Any, int]:
    """Model -> rows that deleting `rows` (of `model`) deletes, the rows themselves included."""
    paths = _cascade_paths(model)
    counts: dict[Any, int] = {model: len(rows)}
    for related, lookups in paths.items():
        reached = Q()
        for lookup in lookups:
            reached |= Q(**{f"{lookup}__in": rows})
        counts[related] = related._default_manager.filter(reached).distinct().count()
    return counts


def _cascade_paths(model: type[models.Model]) -> dict[Any, list[str]]:
    """Every model reached from `model` through cascading relations, with the lookups from it
    back to `model` (breadth first; a path never visits a model twice)."""
    found: dict[Any, list[str]] = {}
    frontier: list[tuple[Any, str, tuple[Any, ...]]] = [(model, "", (model,))]
    for _ in range(MAX_DEPTH):
        following = []
        for current, lookup, seen in frontier:
            for relation in _reverse_relations(current):
                if relation.on_delete is not models.CASCADE:
                    continue
                related = relation.related_model
                if related in seen:
                    continue
                path = relation.field.name + (f"__{lookup}" if lookup else "")
                found.setdefault(related, []).append(path)
                following.append((related, path, (*seen, related)))
        frontier = following
    return found


def _reverse_relations(model: Any) -> list[Any]:
    """The foreign keys pointing at `model`, those of many-to-many tables included (hidden from
    `related_objects`: a quota's member rows go with it)."""
    return [
        field
        for field in model._meta.get_fields(include_hidden=True)
        if field.auto_created and not field.concrete and (field.one_to_many or field.one_to_one)
    ]
