"""A serializer that refuses fields it does not know, so a typo never passes silently."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def find_nul(value: Any, path: str = "") -> str | None:
    """The path of the first string (or key) holding a NUL character, which PostgreSQL refuses."""
    if isinstance(value, str):
        return path or "value" if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and "\x00" in key:
                return where
            found = find_nul(item, where)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = find_nul(item, f"{path}[{index}]")
            if found:
                return found
    return None


def refuse_nul(data: Any) -> None:
    where = find_nul(data)
    if where:
        field = where.split(".", 1)[0].split("[", 1)[0]
        raise serializers.ValidationError({field: [f"{where}: NUL characters are not allowed"]})


class StrictSerializer(serializers.Serializer):  # type: ignore[type-arg]
    def to_internal_value(self, data: Any) -> Any:
        refuse_nul(data)
        if isinstance(data, dict):
            unknown = sorted(str(key) for key in data if key not in self.fields)
            if unknown:
                raise serializers.ValidationError(
                    {
                        key: [f"unknown field; known fields: {sorted(self.fields)}"]
                        for key in unknown
                    }
                )
        return super().to_internal_value(data)


class StrictModelSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    def to_internal_value(self, data: Any) -> Any:
        refuse_nul(data)
        if isinstance(data, dict):
            writable = {name for name, f in self.fields.items() if not f.read_only}
            unknown = sorted(str(key) for key in data if key not in writable)
            if unknown:
                raise serializers.ValidationError(
                    {
                        key: [f"unknown or read-only field; writable: {sorted(writable)}"]
                        for key in unknown
                    }
                )
        return super().to_internal_value(data)
