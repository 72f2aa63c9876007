"""What Django's own collector would delete with some rows: the reference the fast cluster
deletion (koordweb.models.deletion) and the admin's counts are checked against."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.deletion import Collector


def collected(*rows: models.Model) -> dict[Any, set[Any]]:
    """Model -> the primary keys the collector deletes with `rows` (none of them deleted)."""
    collector = Collector(using="default")
    collector.collect(list(rows))
    found: dict[Any, set[Any]] = {m: {r.pk for r in objs} for m, objs in collector.data.items()}
    for queryset in collector.fast_deletes:  # a model reached twice is deleted by both
        found.setdefault(queryset.model, set()).update(queryset.values_list("pk", flat=True))
    return {m: pks for m, pks in found.items() if pks}
