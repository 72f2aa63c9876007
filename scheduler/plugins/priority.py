"""PrioritySort plugin. Extension point: QueueSort.

Pending jobs go highest priority first, then in submission order, then by job id (the name
tie-break that keeps a round deterministic).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.model import JobInfo


class PrioritySort:
    name = "PrioritySort"
    extension_points = frozenset({"QueueSort"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args = dict(args or {})

    def sort_key(self, job: JobInfo) -> tuple[Any, ...]:
        return (-job.priority, job.submission_order, job.id)
