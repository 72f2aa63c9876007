"""Validators shared by the models: resource lists are JSON objects of non-negative integers."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError


def validate_resource_list(value: Any) -> None:
    """A ResourceList in integer units, e.g. {"cpu": 4000, "nvidia.com/gpu": 8}."""
    if not isinstance(value, dict):
        raise ValidationError("must be an object of resource name to integer amount")
    for name, amount in value.items():
        if not isinstance(name, str) or not name:
            raise ValidationError("resource names must be non-empty strings")
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise ValidationError(f"{name}: amount must be an integer, got {amount!r}")
        if amount < 0:
            raise ValidationError(f"{name}: amount must not be negative, got {amount}")


def validate_string_map(value: Any) -> None:
    """Labels and annotations: string keys to string values."""
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError("must be an object of string keys to string values")
