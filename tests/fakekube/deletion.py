"""Graceful deletion, decided the way kube-apiserver's BeforeDelete and the pod strategy's
CheckGracefulDelete decide it.

A pod's grace period is the DeleteOptions' `gracePeriodSeconds`, else its
`spec.terminationGracePeriodSeconds` (30 when unset: API defaulting), 0 for a pod not bound to a
node or already terminal, and 1 for a negative value. The pod gets `deletionTimestamp` (now +
grace) and `deletionGracePeriodSeconds` and stays until its kubelet is done with it; a grace of 0
writes both and deletes at once (a MODIFIED then a DELETED event). A pod already terminating keeps
its deadline unless a shorter grace is asked for: the deadline moves earlier by the difference.
Other kinds have no graceful deletion: they go at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fakekube import errors
from tests.fakekube.store import Obj, meta
from tests.fakekube.usage import is_terminal

DEFAULT_GRACE = 30
_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Plan:
    """What a DELETE does to a pod: `now` (remove), `pending` (nothing new) or `mark`."""

    action: str
    timestamp: str | None = None
    grace: int = 0
    shortened_by: int = 0


def grace_option(options: Obj, query: dict[str, str]) -> int | None:
    """The requested grace period (body first, then the query), negative values read as 1."""
    raw: Any = options.get("gracePeriodSeconds")
    if raw is None:
        raw = query.get("gracePeriodSeconds")
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError) as exc:
        raise errors.bad_request(f"invalid gracePeriodSeconds: {raw!r}") from exc
    return 1 if value < 0 else value


def check_preconditions(kind: str, group: str, current: Obj, options: Obj) -> None:
    """DeleteOptions.preconditions (uid, resourceVersion): BeforeDelete's 409 on a mismatch."""
    preconditions = options.get("preconditions") or {}
    for field in ("uid", "resourceVersion"):
        wanted = preconditions.get(field)
        if wanted and wanted != meta(current)[field]:
            raise errors.precondition_conflict(
                kind, group, meta(current)["name"], field, wanted, meta(current)[field]
            )


def plan_pod_delete(pod: Obj, grace: int | None) -> Plan:
    pod_meta = meta(pod)
    if pod_meta.get("deletionTimestamp"):
        current = pod_meta.get("deletionGracePeriodSeconds")
        if not current:
            return Plan("now")
        if grace is None or grace >= current:
            return Plan("pending")
        moved = _parse(pod_meta["deletionTimestamp"]) - timedelta(seconds=current - grace)
        return Plan("mark", _format(moved), grace, current - grace)
    spec = pod.get("spec") or {}
    period = grace if grace is not None else spec.get("terminationGracePeriodSeconds")
    period = DEFAULT_GRACE if period is None else int(period)
    if not spec.get("nodeName") or is_terminal(pod):
        period = 0
    period = 1 if period < 0 else period
    return Plan("mark", _format(datetime.now(UTC) + timedelta(seconds=period)), period)


def mark(pod: Obj, plan: Plan) -> Obj:
    """Write the plan's deletionTimestamp and grace onto the pod (a store.update change)."""
    meta(pod)["deletionTimestamp"] = plan.timestamp
    meta(pod)["deletionGracePeriodSeconds"] = plan.grace
    return pod


def _parse(value: str) -> datetime:
    return datetime.strptime(value, _FORMAT).replace(tzinfo=UTC)


def _format(value: datetime) -> str:
    return value.strftime(_FORMAT)
