"""A safe YAML loader for untrusted multi-document manifests.

It builds on yaml's SafeLoader (libyaml's C parser when present: a 5 MB dump loads several times
faster) and refuses what a cluster dump never needs but an attacker can use: anchors and aliases
(the "billion laughs" expansion), input over 5 MB, nesting deeper than 32, and duplicate mapping
keys (YAML silently lets the last one win). Timestamps stay strings, as Kubernetes' own decoder
sees them, so every value is JSON-serializable; so do integers longer than 40 characters, which
no field accepts: the field's own check then refuses them by name instead of Python's int()
refusing a 5,000-digit number with an exception. Errors name the 1-based document index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from koordweb.manifests.errors import ManifestError

MAX_MANIFEST_BYTES = 5 * 1024 * 1024
MAX_DEPTH = 32
MAX_INTEGER_CHARACTERS = 40

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Rejected(yaml.YAMLError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _StrictLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """SafeLoader that keeps timestamps as strings and refuses duplicate keys."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        # Compare the scalar key nodes themselves: constructing every key twice would double
        # the cost of loading a large dump.
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise _Rejected(key_node.value, f"duplicate key ({_line(key_node)})")
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> Any:
        # Bounded before conversion: a longer integer stays text for its field to refuse.
        if len(str(node.value)) > MAX_INTEGER_CHARACTERS:
            return str(node.value)
        return super().construct_yaml_int(node)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)

# Timestamps stay strings: drop the implicit timestamp resolver from our loader only.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _line(holder: Any) -> str:
    mark = getattr(holder, "start_mark", None)
    return f"line {mark.line + 1}" if mark is not None else "unknown position"


def _check_events(text: str) -> None:
    """One pass over the parser events: refuse anchors, aliases and deep nesting early.

    Running before construction means an alias bomb is never expanded and a syntax error is
    reported with the index of the document it is in.
    """
    parser = _BaseLoader(text)
    document, depth = 0, 0
    # Exact-type dispatch: this loop sees every event of a 5 MB file, scalars most often.
    scalar, opening = yaml.ScalarEvent, (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    closing = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    try:
        while parser.check_event():
            event = parser.get_event()
            kind = type(event)
            if kind is scalar:
                if "\x00" in event.value:
                    raise ManifestError(
                        document, "yaml", f"NUL characters are not allowed ({_line(event)})"
                    )
            elif kind in opening:
                depth += 1
                if depth > MAX_DEPTH:
                    raise ManifestError(
                        document, "yaml", f"nesting deeper than {MAX_DEPTH} levels ({_line(event)})"
                    )
            elif kind in closing:
                depth -= 1
                continue
            elif kind is yaml.DocumentStartEvent:
                document += 1
                continue
            elif kind is yaml.AliasEvent:
                raise ManifestError(
                    document, "yaml", f"aliases are not allowed (*{event.anchor}, {_line(event)})"
                )
            else:
                continue
            if event.anchor is not None:
                raise ManifestError(
                    document, "yaml", f"anchors are not allowed (&{event.anchor}, {_line(event)})"
                )
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or exc.context or "invalid YAML"
        where = f" at line {exc.problem_mark.line + 1}" if exc.problem_mark else ""
        raise ManifestError(max(document, 1), "yaml", f"{problem}{where}") from exc
    except yaml.YAMLError as exc:
        raise ManifestError(max(document, 1), "yaml", str(exc)) from exc
    finally:
        parser.dispose()


def load_documents(
    text: str | bytes, *, progress: Callable[[int, int], None] | None = None
) -> list[Any]:
    """Every document of a YAML stream, in order (an empty document is None).

    `progress(done, total)` is called after each document with characters read so far.
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
    _check_events(text)
    loader = _StrictLoader(text)
    documents: list[Any] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            documents.append(None if node is None else loader.construct_document(node))
            if progress is not None and node is not None:
                progress(node.end_mark.index, len(text))
    except _Rejected as exc:
        raise ManifestError(len(documents) + 1, exc.field, exc.message) from exc
    except yaml.YAMLError as exc:  # e.g. an unknown tag such as !!python/object
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError(len(documents) + 1, "yaml", " ".join(problem.split())) from exc
    finally:
        loader.dispose()
    return documents
