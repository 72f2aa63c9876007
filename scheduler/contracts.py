"""Plugin contracts: whether a plugin class implements what it declares.

`conformance_problems(cls)` lists, in words naming the plugin and the method, what keeps a plugin
from the extension points in its `extension_points` (`scheduler.framework.POINT_METHODS`): a
declared point's method missing or taking fewer positional arguments than the point passes, an
extension method of a point it does not declare, a method named like a misspelt extension method.
The profile builder refuses a plugin with any (`scheduler.profile.load_plugin`, `check_args`).
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

from scheduler.framework import EXTENSION_POINTS, POINT_METHODS, POINT_PROTOCOLS

_POINT_OF = {m: point for point, flavours in POINT_METHODS.items() for f in flavours for m in f}
_MISSPELT_CUTOFF = 0.8  # `score_node`, `prefilter`, `post_filters`; not `estimate` or `search`


def conformance_problems(cls: type) -> list[str]:
    """What keeps the plugin class `cls` from its declared contracts (empty: none): a declared
    extension point whose methods are missing or take other arguments than its Protocol, an
    extension method of a point it does not declare, a method named like a misspelt extension
    method (`score_node` for `score_nodes`), an unknown point, a missing `name`."""
    label = getattr(cls, "__name__", str(cls))
    name = getattr(cls, "name", None)
    points = getattr(cls, "extension_points", None)
    if not isinstance(name, str) or not name:
        return [f"{label} has no `name`"]
    if not isinstance(points, (set, frozenset)) or not all(isinstance(p, str) for p in points):
        return [f"{name}: `extension_points` must be a frozenset of point names"]
    problems = [
        f"{name} declares unknown extension point {p!r}; known: {', '.join(EXTENSION_POINTS)}"
        for p in sorted(points)
        if p not in POINT_METHODS
    ]
    for point in sorted(set(points) & set(POINT_METHODS)):
        problems += _point_problems(cls, name, point)
    methods = [m for m, v in inspect.getmembers(cls) if callable(v) and not m.startswith("_")]
    for method in methods:
        point = _POINT_OF.get(method)
        if point is not None:
            if point not in points:
                problems.append(
                    f"{name}.{method} implements extension point {point}, which {name} does"
                    f" not declare in extension_points"
                )
            continue
        close = _misspelt(method)
        if close:
            problems.append(
                f"{name}.{method} looks like a misspelt {close} (extension point"
                f" {_POINT_OF[close]}); rename it, or it would never be called"
            )
    return problems


def _point_problems(cls: type, name: str, point: str) -> list[str]:
    flavours = POINT_METHODS[point]
    present = [f for f in flavours if any(callable(getattr(cls, m, None)) for m in f)]
    if not present:
        wanted = " or ".join(", ".join(f) for f in flavours)
        return [f"{name} declares {point} but has no {wanted} method"]
    problems: list[str] = []
    for flavour in present:
        for method in flavour:
            if not callable(getattr(cls, method, None)):
                problems.append(f"{name} declares {point} but has no {method} method")
            else:
                problems += _signature_problems(cls, name, method, point)
    return problems


def _signature_problems(cls: type, name: str, method: str, point: str) -> list[str]:
    """A method whose positional parameters differ in number from its Protocol's."""
    protocols = POINT_PROTOCOLS[point]
    expected = next(getattr(p, method) for p in protocols if hasattr(p, method))
    want = _positional(expected)
    have = _positional(getattr(cls, method))
    if have is None or want is None or (have[0] <= want[0] and have[1] >= want[1]):
        return []
    wanted = f"{want[0]}" if want[0] == want[1] else f"{want[0]} to {want[1]}"
    return [
        f"{name}.{method} takes {have[1]} positional argument(s) besides self; extension point"
        f" {point} passes {wanted}"
    ]


def _positional(function: Any) -> tuple[int, int] | None:
    """(required, total) positional parameters besides self; None when *args takes any."""
    try:
        params = list(inspect.signature(function).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required), len(positional)


def _misspelt(method: str) -> str:
    """The extension method `method` is probably a misspelling of ("" when none)."""
    squashed = method.replace("_", "").lower()
    for known in _POINT_OF:
        if known.replace("_", "").lower() == squashed:
            return known
    close = difflib.get_close_matches(method, list(_POINT_OF), n=1, cutoff=_MISSPELT_CUTOFF)
    return close[0] if close else ""
