"""Text that cannot be written out: a lone surrogate (a JSON `"\\ud800"` or a YAML `"\\ud800"`
escape decodes to one) has no UTF-8 form, so no response, row or log line can carry it.

Every door that decodes escapes (the API's JSON parser, the YAML submission) asks
`first_unencodable` and refuses the body with a 400 that names where, never echoing the text.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def is_unencodable(text: str) -> bool:
    """Does `text` hold a code point UTF-8 cannot encode (a surrogate left unpaired)?"""
    return _SURROGATE.search(text) is not None


def printable_path(path: str) -> str:
    """A path safe to answer with: its own unencodable characters as backslash escapes."""
    return path.encode("utf-8", "backslashreplace").decode("utf-8")


def first_unencodable(value: Any, path: str = "") -> str | None:
    """The path of the first string or key (in a decoded JSON or YAML value) holding a lone
    surrogate; None when all of it can be encoded."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if is_unencodable(item):
                return printable_path(where or "value")
        elif isinstance(item, dict):
            entries = list(item.items())
            for key, child in reversed(entries):
                at = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and is_unencodable(key):
                    return printable_path(at)
                stack.append((child, at))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None
