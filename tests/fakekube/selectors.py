"""Label and field selectors, parsed and matched the way the API server does.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by commas.
Field selectors: `f=v`, `f==v`, `f!=v` over the fields a resource declares; anything else is the
server's 400 `field label not supported`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.fakekube.errors import ApiError, bad_request
from tests.fakekube.resources import ResourceType

Matcher = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^([A-Za-z0-9./_-]+)\s+(in|notin)\s+\(([^)]*)\)$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside a `(...)` value set."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        terms.append(current.strip())
    return terms


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    match = _SET_RE.match(term)
    if match:
        key, op, raw = match.groups()
        values = {v.strip() for v in raw.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for op in ("!=", "==", "="):
        if op in term:
            key, value = (s.strip() for s in term.split(op, 1))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        key = term[1:].strip()
        return lambda labels: key not in labels
    if re.fullmatch(r"[A-Za-z0-9./_-]+", term):
        return lambda labels: term in labels
    raise bad_request(f"unable to parse requirement: invalid label selector term {term!r}")


def label_matcher(selector: str | None) -> Matcher:
    if not selector:
        return lambda obj: True
    terms = [_label_term(t) for t in _split_terms(selector)]

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(term(labels) for term in terms)

    return matches


def field_value(obj: dict[str, Any], path: str) -> str:
    """A field as the server renders it for selection: missing is "", booleans are lowercase."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_matcher(selector: str | None, resource: ResourceType) -> Matcher:
    if not selector:
        return lambda obj: True
    checks: list[tuple[str, bool, str]] = []
    for term in _split_terms(selector):
        for op in ("!=", "==", "="):
            if op in term:
                field, value = (s.strip() for s in term.split(op, 1))
                break
        else:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
        if field not in resource.field_labels:
            raise ApiError(400, "BadRequest", f"field label not supported: {field}")
        checks.append((field, op == "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, f) == v) != negate for f, negate, v in checks)

    return matches
