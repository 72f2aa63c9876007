"""The outbox's write side: a plan (`EnactPlan`) as pending Intent rows, one per action.

Written inside the transaction that decided the plan (a round, a cancellation, a sync that found
submitted pods to create); `services.outbox.intents_enact` applies them after the commit. It sits
beside the protocol it stores so that backends can write intents without calling services.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from koordweb.backends.base import EnactPlan
from koordweb.models import Cluster, Intent
from koordweb.models.outbox import STEPS
from koordweb.rows.bulk import rows_insert_ids


class Written(NamedTuple):
    """An intent as written, with its id: the round that wrote it enacts it without reading it
    back (`services.outbox.RoundIntents`)."""

    id: int
    kind: str
    pod_id: int
    node: str
    uid: str
    payload: dict[str, Any]


def intents_write(
    *, cluster: Cluster, round_id: int | None, plan: EnactPlan, now: datetime
) -> list[Written]:
    """The plan as pending intents, in enact order (call inside the transaction that decided
    it); returns them as written."""
    rows: list[tuple[Any, ...]] = []

    def add(kind: str, pod_id: int, node: str = "", uid: str = "", payload: Any = None) -> None:
        step = STEPS[Intent.Kind(kind)]
        state = Intent.State.PENDING
        rows.append((cluster.id, round_id, pod_id, kind, step, state, node, uid, payload or {}))

    for c in plan.creations:
        add(Intent.Kind.CREATE, c.pod_id)
    for b in plan.bindings:
        payload: dict[str, Any] = {"annotations": b.annotations}
        if b.labels:
            payload["labels"] = b.labels
        add(Intent.Kind.BIND, b.pod_id, b.node, b.uid, payload)
    for e in plan.evictions:
        payload = {"preemptor": e.preemptor, "preemption": e.preemption_id}
        add(Intent.Kind.EVICT, e.pod_id, uid=e.uid, payload=payload)
    for n in plan.nominations:
        add(Intent.Kind.NOMINATE, n.pod_id, n.node)
    for d in plan.deletions:
        add(Intent.Kind.DELETE, d.pod_id, uid=d.uid)
    ids = rows_insert_ids(Intent, _INSERT_FIELDS, [(*row, "", now) for row in rows])
    return [
        Written(intent_id, kind, pod_id, node, uid, payload)
        for intent_id, (_c, _r, pod_id, kind, _s, _st, node, uid, payload) in zip(
            ids, rows, strict=True
        )
    ]


_INSERT_FIELDS = (
    "cluster",
    "round",
    "pod",
    "kind",
    "step",
    "state",
    "node",
    "uid",
    "payload",
    "outcome",
    "created_at",
)
