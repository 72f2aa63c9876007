"""Typed, path-aware reads from one manifest document: every failure names document and field."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from koordweb.kubenames import (
    affinity_errors,
    annotations_errors,
    is_dns_label,
    is_dns_subdomain,
    labels_errors,
    toleration_errors,
)
from koordweb.manifests.errors import ManifestError
from koordweb.quantity import QuantityError, parse_resource_list

# Durations and counts are stored in 32-bit integer columns.
MAX_INT32 = 2**31 - 1


@dataclass(frozen=True)
class At:
    """A value inside document `index`, reached by `path` (e.g. `spec.devices[2].minor`)."""

    index: int
    value: Any
    path: str = ""

    def where(self, key: str | int | None = None) -> str:
        if key is None:
            return self.path or "<document>"
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def fail(self, message: str, key: str | int | None = None) -> NoReturn:
        raise ManifestError(self.index, self.where(key), message)

    def child(self, key: str) -> At:
        """The value under `key` (None when absent); the value here must be a mapping."""
        mapping = self.mapping()
        return At(self.index, mapping.get(key), self.where(key))

    def items(self) -> list[At]:
        """The elements of a list (an absent list is empty)."""
        if self.value is None:
            return []
        if not isinstance(self.value, list):
            self.fail("must be a list")
        return [At(self.index, item, self.where(i)) for i, item in enumerate(self.value)]

    def mapping(self) -> Mapping[str, Any]:
        if self.value is None:
            return {}
        if not isinstance(self.value, Mapping):
            self.fail("must be a mapping")
        return self.value

    def present(self) -> bool:
        return self.value is not None

    # Scalars. `required=True` makes an absent value an error naming the field.
    def string(self, default: str = "", *, required: bool = False, max_length: int = 253) -> str:
        if self.value is None:
            if required:
                self.fail("is required")
            return default
        if not isinstance(self.value, str):
            self.fail(f"must be a string, got {self.value!r}")
        if required and not self.value:
            self.fail("must not be empty")
        if len(self.value) > max_length:
            self.fail(f"longer than {max_length} characters")
        return self.value

    def integer(
        self,
        default: int = 0,
        *,
        required: bool = False,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:
        value = self.value
        if value is None:
            if required:
                self.fail("is required")
            return default
        if isinstance(value, str) and re.fullmatch(r"[+-]?\d{1,18}", value.strip()):
            value = int(value)  # annotations carry integers as strings
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"must be an integer, got {self.value!r}")
        if minimum is not None and value < minimum:
            self.fail(f"must be at least {minimum}, got {value}")
        if abs(value) > 2**63 - 1 or (maximum is not None and value > maximum):
            self.fail(f"is out of range (at most {maximum if maximum is not None else 2**63 - 1})")
        return value

    def boolean(self, default: bool = False) -> bool:
        value = self.value
        if value is None:
            return default
        if isinstance(value, str) and value.lower() in {"true", "false"}:
            return value.lower() == "true"  # labels carry booleans as strings
        if not isinstance(value, bool):
            self.fail(f"must be true or false, got {value!r}")
        return value

    def string_map(self) -> dict[str, str]:
        """Labels, annotations, nodeSelector, ConfigMap data: string keys to string values."""
        result: dict[str, str] = {}
        for key, value in self.mapping().items():
            if not isinstance(key, str) or not isinstance(value, str):
                self.fail(f"must map strings to strings; {key!r}: {value!r} is not (quote it)")
            result[key] = value
        return result

    def labels(self) -> dict[str, str]:
        """Labels or a node selector: keys and values as the Kubernetes API server accepts them."""
        return self._checked_map(labels_errors)

    def annotations(self) -> dict[str, str]:
        """Annotations: keys as the Kubernetes API server accepts them, 256 KiB in all."""
        return self._checked_map(annotations_errors)

    def _checked_map(self, check: Callable[[dict[str, str]], list[str]]) -> dict[str, str]:
        mapping = self.string_map()
        refused = check(mapping)
        if refused:
            self.fail(refused[0])
        return mapping

    def tolerations(self) -> list[dict[str, Any]]:
        """A pod's tolerations, kept as written once each is one the API server accepts."""
        kept = []
        for item in self.items():
            toleration = dict(item.mapping())
            for name, reason in toleration_errors(toleration).items():
                item.fail(reason, name)
            kept.append(toleration)
        return kept

    def json_value(self, default: Any) -> Any:
        """A free-form value kept whole (taints, conditions, selectors)."""
        return default if self.value is None else self.value

    def affinity(self) -> dict[str, Any]:
        """A pod's affinity, kept as written once the API server would accept it."""
        if self.value is None:
            return {}
        for path, reason in affinity_errors(self.value).items():
            self.fail(reason, path or None)
        return dict(self.value)

    def resources(self) -> dict[str, int]:
        try:
            return parse_resource_list(self.value, field=self.where())
        except QuantityError as exc:
            raise ManifestError(
                self.index, exc.field, exc.reason + f" (got {exc.value!r})"
            ) from exc

    def timestamp(self) -> datetime | None:
        """An RFC 3339 time such as `2026-01-02T03:04:05Z`, as an aware UTC datetime."""
        if self.value is None:
            return None
        if not isinstance(self.value, str):
            self.fail(f"must be an RFC 3339 timestamp string, got {self.value!r}")
        try:
            parsed = datetime.fromisoformat(self.value)
        except ValueError:
            self.fail(f"must be an RFC 3339 timestamp, got {self.value!r}")
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)

    def json_text(self, default: Any) -> Any:
        """An annotation whose string value is JSON (gang groups, topology spec, shared weight)."""
        text = self.string()
        if not text:
            return default
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            self.fail(f"must be JSON ({exc.msg} at column {exc.colno})")


def format_timestamp(moment: datetime | None) -> str | None:
    """RFC 3339 in UTC to the second, as Kubernetes writes metav1.Time."""
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Metadata:
    namespace: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    created_at: datetime | None
    deleting: bool
    uid: str


def read_metadata(doc: At, *, namespaced: bool, default_namespace: str = "default") -> Metadata:
    """`metadata` of a document; `name` is required, a namespace only where the kind has one."""
    meta = doc.child("metadata")
    if not meta.present():
        doc.fail("is required", "metadata")
    name = meta.child("name").string(required=True)
    if not is_dns_subdomain(name):
        meta.fail(f"must be a DNS-1123 subdomain (a-z, 0-9, '-', '.'), got {name!r}", "name")
    namespace = ""
    if namespaced:
        namespace = meta.child("namespace").string(default_namespace, max_length=63)
        if not is_dns_label(namespace):
            meta.fail(f"must be a DNS label, got {namespace!r}", "namespace")
    return Metadata(
        namespace=namespace,
        name=name,
        labels=meta.child("labels").labels(),
        annotations=meta.child("annotations").annotations(),
        created_at=meta.child("creationTimestamp").timestamp(),
        deleting=meta.child("deletionTimestamp").present(),
        uid=meta.child("uid").string(max_length=64),
    )


def pop_keys(mapping: dict[str, str], *keys: str) -> dict[str, str]:
    """Remove and return the entries of `keys` that koordweb models as fields of its own."""
    return {key: mapping.pop(key) for key in keys if key in mapping}
