"""Idempotency-Key for submissions: a retry returns the first job, another body is refused.

The key is unique per owner (a constraint on Job); the digest of the body that first used it is
kept beside it (`Job.idempotency_fingerprint`). A JSON submission's digest is taken over its
validated spec, so key order and spacing do not matter; a YAML submission's over its text. The
same key with another body answers 422, as the IETF draft "The Idempotency-Key HTTP Header
Field" says. `job_submitted_once` is the one place a submission (JSON, YAML, manifests) looks the
key up: before writing, and again when its write loses a race.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError

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


def job_submitted_once(
    *,
    owner: Any,
    key: str | None,
    digest: str,
    create: Callable[[], Job],
    refused: Callable[[Exception], Exception],
    conflicts: tuple[type[Exception], ...] = (IntegrityError,),
) -> tuple[Job, bool]:
    """(job, created): the job this key already made, else `create()`'s.

    Concurrent submissions with one key race to the unique constraint on (owner, key): the loser's
    write fails with one of `conflicts`, and it answers with the winner's job; a conflict that is
    not a replay is raised as `refused(exc)`.
    """
    existing = job_replayed(owner=owner, key=key, digest=digest)
    if existing is not None:
        return existing, False
    try:
        return create(), True
    except conflicts as exc:
        existing = job_replayed(owner=owner, key=key, digest=digest)
        if existing is not None:
            return existing, False
        raise refused(exc) from exc
