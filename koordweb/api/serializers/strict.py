"""A serializer that refuses fields it does not know, so a typo never passes silently."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):  # type: ignore[type-arg]
    def to_internal_value(self, data: Any) -> Any:
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
