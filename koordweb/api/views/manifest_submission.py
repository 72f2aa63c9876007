"""Submitting a job as a Kubernetes manifest (a PodGroup with pods, or pods of a gang)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import UnsupportedMediaType
from rest_framework.request import Request

from koordweb.models import Job


def submit_manifest(
    *, request: Request, text: str, idempotency_key: str | None
) -> tuple[Job, bool]:
    raise UnsupportedMediaType(
        "application/yaml", "YAML submissions need koordweb.manifests, which is not installed yet."
    )


__all__: list[Any] = ["submit_manifest"]
