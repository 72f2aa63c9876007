"""Submitting a job as Kubernetes YAML: a PodGroup with its pods, or the pods of a gang.

The jobs service holds the documents to the submission policy (tenants), parses them (the
manifests loader refuses aliases, anchors, deep nesting and oversized input), checks the job
against the cluster and writes it.
"""

from __future__ import annotations

from rest_framework.request import Request

from koordweb.models import Job
from koordweb.services.jobs import job_submit_manifest


def submit_manifest(
    *, request: Request, text: str, idempotency_key: str | None
) -> tuple[Job, bool]:
    return job_submit_manifest(
        user=request.user,
        text=str(text),  # the C loader wants a plain str
        cluster=request.query_params.get("cluster") or None,
        idempotency_key=idempotency_key,
    )
