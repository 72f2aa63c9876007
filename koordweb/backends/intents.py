"""The outbox's write side: a plan (`EnactPlan`) as pending Intent rows, one per action.

Written inside the transaction that decided the plan (a round, a cancellation, a sync that found
submitted pods to create); `engine.outbox.intents_enact` applies them after the commit. It sits
beside the protocol it stores so that backends can write intents without calling services.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from koordweb.backends.base import Binding, Creation, Deletion, EnactPlan, Eviction, Nomination
from koordweb.models import Cluster, Intent
from koordweb.models.outbox import STEPS
from koordweb.rows.bulk import rows_insert_ids

Action = Binding | Eviction | Nomination | Creation | Deletion


class Written(NamedTuple):
    """An intent as written, with its id and the plan's own action: the round that wrote it
    enacts that action without reading the intent back or building it again
    (`koordweb.engine.outbox.RoundIntents`)."""

    id: int
    kind: str
    pod_id: int
    node: str
    uid: str
    payload: dict[str, Any]
    action: Action | None = None


def intents_write(
    *, cluster: Cluster, round_id: int | None, plan: EnactPlan, now: datetime
) -> list[Written]:
    """The plan as pending intents, in enact order (call inside the transaction that decided
    it); returns them as written."""
    rows: list[tuple[Any, ...]] = []
    actions: list[Action] = []

    def add(action: Action, kind: str, node: str = "", uid: str = "", payload: Any = None) -> None:
        step = STEPS[Intent.Kind(kind)]
        state = Intent.State.PENDING
        pod_id = action.pod_id
        rows.append((cluster.id, round_id, pod_id, kind, step, state, node, uid, payload or {}))
        actions.append(action)

    for c in plan.creations:
        add(c, Intent.Kind.CREATE)
    for b in plan.bindings:
        payload: dict[str, Any] = {"annotations": b.annotations}
        if b.labels:
            payload["labels"] = b.labels
        add(b, Intent.Kind.BIND, b.node, b.uid, payload)
    for e in plan.evictions:
        payload = {"preemptor": e.preemptor, "preemption": e.preemption_id}
        add(e, Intent.Kind.EVICT, uid=e.uid, payload=payload)
    for n in plan.nominations:
        add(n, Intent.Kind.NOMINATE, n.node)
    for d in plan.deletions:
        add(d, Intent.Kind.DELETE, uid=d.uid)
    ids = rows_insert_ids(Intent, _INSERT_FIELDS, [(*row, "", now) for row in rows])
    return [
        Written(intent_id, kind, pod_id, node, uid, payload, action)
        for intent_id, (_c, _r, pod_id, kind, _s, _st, node, uid, payload), action in zip(
            ids, rows, actions, strict=True
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
