"""Every URL pattern of the project as a concrete path, path parameters filled by the caller.

Patterns are walked from `get_resolver()` (so a route added tomorrow is covered tomorrow); route
converters (`<int:pk>`) and regex groups (`(?P<pk>[^/.]+)`, DRF's format suffixes) are replaced by
values a `fill(name, collection)` callback picks, where `collection` is the path segment in front
of the parameter ("jobs", "preemptions", "tokens", "job" for the admin...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver

_ROUTE_PARAM = re.compile(r"<(?:\w+:)?(\w+)>")
_REGEX_GROUP = re.compile(r"\(\?P<(\w+)>")


@dataclass(frozen=True)
class Route:
    template: str  # e.g. "api/v1/^jobs/(?P<pk>[^/.]+)/$" or "jobs/<int:pk>/"
    name: str | None
    module: str

    @property
    def params(self) -> list[str]:
        return _ROUTE_PARAM.findall(self.template) + _REGEX_GROUP.findall(self.template)


def routes() -> list[Route]:
    def walk(resolver: URLResolver, prefix: str) -> Iterator[Route]:
        for pattern in resolver.url_patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                module = getattr(pattern.callback, "__module__", "") or ""
                yield Route(prefix + str(pattern.pattern), pattern.name, module)

    return list(walk(get_resolver(), ""))


def _collection(template: str, start: int) -> str:
    before = re.sub(r"[\^$\\]", "", template[:start]).rstrip("/")
    return before.rsplit("/", 1)[-1]


def _close_group(text: str, start: int) -> int:
    """Index just past the group that opens at `start` (nested groups and escapes allowed)."""
    depth, index = 0, start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    raise ValueError(f"unbalanced group in {text!r}")


def concrete(route: Route, fill: Callable[[str, str], str]) -> str:
    """The route as a path ("/api/v1/jobs/42/"), every parameter replaced by `fill`."""
    text = route.template
    out: list[str] = []
    index = 0
    while index < len(text):
        route_param = _ROUTE_PARAM.match(text, index)
        group = _REGEX_GROUP.match(text, index)
        if route_param:
            out.append(fill(route_param.group(1), _collection(text, index)))
            index = route_param.end()
        elif group:
            out.append(fill(group.group(1), _collection(text, index)))
            index = _close_group(text, index)
        elif text.startswith("/?", index):
            out.append("/")
            index += 2
        elif text[index] in "^$":
            index += 1
        elif text[index] == "\\":
            out.append(text[index + 1])
            index += 2
        else:
            out.append(text[index])
            index += 1
    return "/" + "".join(out).replace("//", "/")
