"""HTML pages read through selectors (`koordweb.selectors`), as the API does: no view module
reaches a model's manager, builds a query expression or fetches rows by a model class."""

from __future__ import annotations

import ast
from pathlib import Path

VIEWS = Path(__file__).resolve().parents[2] / "koordweb" / "views"
# Query building belongs to selectors; a view may only name QuerySet in a type.
ALLOWED_FROM_DJANGO_DB = {"QuerySet"}
MODEL_FETCHERS = {"get_object_or_404", "get_list_or_404"}


def orm_uses(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ("objects", "_default_manager"):
            found.append(f"{name}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("django.db"):
            extra = {alias.name for alias in node.names} - ALLOWED_FROM_DJANGO_DB
            if extra:
                found.append(f"{name}:{node.lineno}: from {node.module} import {sorted(extra)}")
        elif isinstance(node, ast.Name) and node.id in MODEL_FETCHERS:
            found.append(f"{name}:{node.lineno}: {node.id}")
    return sorted(found, key=lambda text: int(text.split(":")[1]))


def test_views_use_no_orm() -> None:
    found = []
    for path in sorted(VIEWS.glob("*.py")):
        found += orm_uses(path.read_text(), path.name)
    assert found == []


def test_the_scan_finds_orm_use() -> None:
    source = (
        "from django.db.models import OuterRef, QuerySet\n"
        "from django.shortcuts import get_object_or_404\n"
        "rows = Pod.objects.filter(job=1)\n"
        "job = get_object_or_404(Job, pk=1)\n"
    )
    assert orm_uses(source, "v.py") == [
        "v.py:1: from django.db.models import ['OuterRef']",
        "v.py:3: .objects",
        "v.py:4: get_object_or_404",
    ]
