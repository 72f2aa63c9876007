"""Serializer fields for Kubernetes values (resource quantities and lists) and redacted JSON.

Quantities are parsed into koordweb's integer units (cpu in millicores, everything else in base
units, i.e. bytes for memory and counts for devices) by `koordweb.quantity`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any

from rest_framework import serializers

from koordweb.quantity import QuantityError
from koordweb.quantity import parse_resource_quantity as parse_quantity_into_units
from koordweb.selectors.redaction import Redactor


def parse_resource_quantity(resource: str, value: Any) -> int:
    """The integer amount of `resource` that `value` (a string or a number) means."""
    try:
        return parse_quantity_into_units(resource, value, field=resource)
    except QuantityError as exc:
        raise ValueError(f"invalid quantity: {exc.reason}") from exc


_RESOURCE_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


class ResourceListField(serializers.DictField):
    """{"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"} -> {"cpu": 4000, ...}."""

    default_error_messages = {
        "bad_name": "{name!r} is not a valid resource name.",
        "bad_quantity": "{name}: {message}",
        "too_many": "at most 64 resources.",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.CharField(max_length=64), **kwargs)

    def to_internal_value(self, data: Any) -> dict[str, int]:
        if not isinstance(data, dict):
            self.fail("not_a_dict", input_type=type(data).__name__)
        if len(data) > 64:
            self.fail("too_many")
        parsed: dict[str, int] = {}
        for name, raw in data.items():
            if not isinstance(name, str) or len(name) > 253 or not _RESOURCE_NAME.match(name):
                self.fail("bad_name", name=name)
            try:
                parsed[name] = parse_resource_quantity(name, raw)
            except ValueError as exc:
                self.fail("bad_quantity", name=name, message=str(exc))
        return parsed


def redactor_for(context: Mapping[str, Any]) -> Redactor:
    """The viewer's Redactor, made once per serializer context (anonymous without a request:
    a serializer used without its request sees nothing of anyone)."""
    found = context.get("redactor")
    if not isinstance(found, Redactor):
        request = context.get("request")
        found = Redactor(getattr(request, "user", None))
        if isinstance(context, MutableMapping):
            context["redactor"] = found
    return found


class RedactedJSONField(serializers.JSONField):
    """A read-only JSON attribute (decision details, round metrics) redacted for the viewer."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> Any:
        return redactor_for(self.context).json(super().to_representation(value))
