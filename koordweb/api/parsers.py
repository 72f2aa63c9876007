"""Request body parsers for the API: JSON and YAML, each refusing bodies over the size limit.

DRF reads the body as a stream, which bypasses Django's DATA_UPLOAD_MAX_MEMORY_SIZE check, so the
limit is enforced here: a declared Content-Length over it is refused before anything is read, and an
undeclared (chunked) body is read at most one byte past the limit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import BaseParser

from koordweb.unencodable import first_unencodable


class PayloadTooLarge(APIException):
    status_code = 413
    default_detail = "Request body too large."
    default_code = "payload_too_large"


def max_body_bytes() -> int:
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 5 * 1024 * 1024)


def read_limited(stream: Any, parser_context: Mapping[str, Any] | None) -> bytes:
    """The whole body, or PayloadTooLarge when it is over the limit."""
    limit = max_body_bytes()
    request = (parser_context or {}).get("request")
    declared = 0
    if request is not None:
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except (TypeError, ValueError):
            declared = 0
    too_large = f"Request body too large: the limit is {limit} bytes."
    if declared > limit:
        raise PayloadTooLarge(too_large)
    data: bytes = stream.read(limit + 1) if stream is not None else b""
    if len(data) > limit:
        raise PayloadTooLarge(too_large)
    return data


# No field takes an integer this long; keeping it as text lets the field refuse it by name
# (Python's int() would refuse a 5,000-digit number with an exception instead).
MAX_INTEGER_CHARACTERS = 40


def bounded_int(text: str) -> int | str:
    return int(text) if len(text) <= MAX_INTEGER_CHARACTERS else text


class LimitedJSONParser(BaseParser):
    """application/json, UTF-8, with the size limit; NaN and Infinity are refused, integers
    are bounded before conversion, and a lone surrogate escape (`"\\ud800"`, which no response
    or row could carry) is refused by where it is, never echoed."""

    media_type = "application/json"

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        raw = read_limited(stream, parser_context)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError("JSON parse error: the body is not UTF-8.") from exc

        def refuse_constant(name: str) -> Any:
            raise ValueError(f"{name} is not valid JSON")

        try:
            data = json.loads(text, parse_constant=refuse_constant, parse_int=bounded_int)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error: {exc}") from exc
        where = first_unencodable(data)
        if where is not None:
            raise ParseError(
                f"JSON parse error: {where} holds a lone surrogate escape (such as \\ud800), "
                "which is not a character"
            )
        return data


class YAMLTextParser(BaseParser):
    """application/yaml (and the x- variants): the body as text; the manifests package parses it.

    Parsing is left to `koordweb.manifests`, whose loader refuses aliases and oversized documents;
    here only the size and the encoding are checked.
    """

    media_type = "application/yaml"

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        raw = read_limited(stream, parser_context)
        try:
            return YAMLText(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ParseError("YAML parse error: the body is not UTF-8.") from exc


class XYAMLTextParser(YAMLTextParser):
    media_type = "application/x-yaml"


class TextYAMLTextParser(YAMLTextParser):
    media_type = "text/yaml"


class YAMLText(str):
    """A YAML body, kept apart from a JSON string body so views can tell which one they got."""


JSON_PARSERS = [LimitedJSONParser]
JSON_AND_YAML_PARSERS = [LimitedJSONParser, YAMLTextParser, XYAMLTextParser, TextYAMLTextParser]
