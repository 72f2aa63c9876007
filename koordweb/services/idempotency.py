"""Idempotency-Key for submissions: a retry returns the first job, another body is refused.

The key is unique per owner (a constraint on Job); the digest of the body that first used it is
kept beside it (`Job.idempotency_fingerprint`). A JSON submission's digest is taken over its
validated spec, so key order and spacing do not matter; a YAML submission's over its text. The
same key with another body answers 422, as the IETF draft "The Idempotency-Key HTTP Header
Field" says.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from koordweb.models import Job


class IdempotencyKeyReused(Exception):
    """An Idempotency-Key sent again with a different body (the API answers 422)."""


def fingerprint(body: Any) -> str:
    """A digest of a submission, to tell a retry from a different request under the same key."""
    text = body if isinstance(body, str) else json.dumps(body, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def job_replayed(*, owner: Any, key: str | None, digest: str) -> Job | None:
    """The job this owner's key already made, or None; the key with another body raises."""
    if not key or owner is None:
        return None
    existing = Job.objects.filter(owner=owner, idempotency_key=key).first()
    # Jobs made before digests were kept ("") are replayed as before.
    if existing is not None and existing.idempotency_fingerprint not in ("", digest):
        raise IdempotencyKeyReused(
            "this Idempotency-Key was already used with a different request body"
        )
    return existing
