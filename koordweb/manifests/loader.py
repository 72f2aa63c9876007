"""A safe YAML loader for untrusted multi-document manifests.

It builds on yaml.SafeLoader and refuses what a cluster dump never needs but an attacker can use:
anchors and aliases (the "billion laughs" expansion), input over 5 MB, nesting deeper than 32, and
duplicate mapping keys (which YAML silently lets the last one win). Timestamps stay strings, as
Kubernetes' own decoder sees them, so every value is JSON-serializable.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

from koordweb.manifests.errors import ManifestError

MAX_MANIFEST_BYTES = 5 * 1024 * 1024
MAX_DEPTH = 32


class _Rejected(yaml.YAMLError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader without anchors, aliases, timestamps, duplicate keys or deep nesting."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Rejected("yaml", f"aliases are not allowed (*{event.anchor}, {_at(event)})")
        if getattr(event, "anchor", None) is not None:
            raise _Rejected("yaml", f"anchors are not allowed (&{event.anchor}, {_at(event)})")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Rejected("yaml", f"nesting deeper than {MAX_DEPTH} levels ({_at(event)})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str) and key in seen:
                raise _Rejected(str(key), f"duplicate key ({_at(key_node)})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _at(mark_holder: Any) -> str:
    mark = getattr(mark_holder, "start_mark", None)
    return f"line {mark.line + 1}" if mark is not None else "unknown position"


# Timestamps stay strings: drop the implicit timestamp resolver from our loader only.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_documents(text: str | bytes) -> list[Any]:
    """Every document of a YAML stream, in order (an empty document is None).

    Raises ManifestError naming the 1-based document index and the field or position.
    """
    size = len(text.encode("utf-8")) if isinstance(text, str) else len(text)
    if size > MAX_MANIFEST_BYTES:
        raise ManifestError(None, "size", f"{size} bytes is over the {MAX_MANIFEST_BYTES} limit")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ManifestError(None, "encoding", f"not UTF-8 ({exc.reason})") from exc
    loader = _StrictLoader(text)
    documents: list[Any] = []
    try:
        while loader.check_node():
            documents.append(loader.get_data())
    except _Rejected as exc:
        raise ManifestError(len(documents) + 1, exc.field, exc.message) from exc
    except (ComposerError, ConstructorError, yaml.MarkedYAMLError) as exc:
        problem = exc.problem or exc.context or "invalid YAML"
        where = f" at line {exc.problem_mark.line + 1}" if exc.problem_mark else ""
        raise ManifestError(len(documents) + 1, "yaml", f"{problem}{where}") from exc
    except yaml.YAMLError as exc:
        raise ManifestError(len(documents) + 1, "yaml", str(exc)) from exc
    finally:
        loader.dispose()
    return documents
