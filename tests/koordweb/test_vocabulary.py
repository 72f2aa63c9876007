"""Every Kubernetes and Koordinator name is declared once, in `scheduler.vocabulary`: no other
module of koordweb or the engine spells one as a string literal."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from scheduler import vocabulary

ROOT = Path(__file__).resolve().parents[2]
# A label, annotation, resource or API version key: `<domain>/<name>`, or a domain's prefix.
NAME = re.compile(r"^[a-z0-9.-]+\.(sh|com|io)/[A-Za-z0-9._-]*$|^[A-Z][A-Za-z]*TopologyLayer$")


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def spelled_names(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    return [
        f"{path.relative_to(root)}:{node.lineno}: {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and NAME.match(node.value)
    ]


def test_names_are_spelled_only_in_the_vocabulary() -> None:
    vocabulary_file = Path(vocabulary.__file__).resolve()
    found: list[str] = []
    for package in ("koordweb", "scheduler"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts or path == vocabulary_file:
                continue
            found += spelled_names(path)
    assert found == []


def test_the_scan_finds_a_spelled_name(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text('"""A docstring naming nvidia.com/gpu is fine."""\nGPU = "nvidia.com/gpu"\n')
    assert spelled_names(module, tmp_path) == ["module.py:2: nvidia.com/gpu"]
