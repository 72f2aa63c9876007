"""Submitting a job as Kubernetes YAML: a PodGroup with its pods, or the pods of a gang.

The manifests package parses (its loader refuses aliases, anchors, deep nesting and oversized
input); the jobs service checks the job against the cluster and writes it.
"""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request

from koordweb.manifests.errors import ManifestError
from koordweb.manifests.parse import parse_manifests
from koordweb.models import Job
from koordweb.services.jobs import job_submit_manifest


def submit_manifest(
    *, request: Request, text: str, idempotency_key: str | None
) -> tuple[Job, bool]:
    try:
        manifests = parse_manifests(str(text))  # the C loader wants a plain str
    except ManifestError as exc:
        raise serializers.ValidationError({"manifest": [str(exc)]}) from exc
    return job_submit_manifest(
        user=request.user,
        manifests=manifests,
        cluster=request.query_params.get("cluster") or None,
        idempotency_key=idempotency_key,
    )
