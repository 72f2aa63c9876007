"""What became of each preemption: did the preemptor start on the nodes nominated for it, when, or
why not.

A preemption promises its preemptor the nodes its victims free (its nominations, held against
jobs of lower or equal priority, as kube-scheduler holds nominated pods). Each round settles the
open ones (`Preemption.Outcome.WAITING`) of its cluster from the engine's answer:
- the preemptor was placed: `STARTED` when every pod went to its nominated node, else
  `STARTED_ELSEWHERE` with how many did not;
- it preempted again: `PREEMPTED_AGAIN`, with why the first did not hold (its victims had not all
  left, the room they freed was taken, or its waiting time ran out);
- its gang's waiting time ran out: `GAVE_UP`, in the engine's words;
- it is no longer in the cluster's queue (cancelled, deleted): `LEFT`.
A new preemption is numbered per preemptor (`attempt`), so a second one for the same job shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from django.db.models import Count

from koordweb.engine.snapshot import SnapshotIndex
from koordweb.models import Cluster, Preemption, PreemptionVictim
from scheduler.api import RoundResult

Outcome = Preemption.Outcome


def preemption_outcomes_record(
    *,
    cluster: Cluster,
    result: RoundResult,
    index: SnapshotIndex,
    new: Iterable[Preemption],
    now: datetime,
) -> None:
    """Settle the cluster's open preemptions from this round's answer, and number `new` ones."""
    new = list(new)
    fresh = {row.id for row in new}
    open_rows = [
        row
        for row in Preemption.objects.filter(cluster=cluster, outcome=Outcome.WAITING).only(
            "id", "preemptor_id", "nominations", "created_at"
        )
        if row.id not in fresh
    ]
    if new:
        _number(new)
    if not open_rows:
        return
    preempting = {record.preemptor for record in result.preemptions}
    placed: dict[str, dict[str, str]] = {}
    for key, placement in result.placements.items():
        placed.setdefault(index.job_by_pod_key.get(key, ""), {})[key] = placement.node
    settled: list[Preemption] = []
    outcome: str
    for row in open_rows:
        engine_id = index.engine_id_by_job.get(row.preemptor_id)
        if engine_id is None:
            outcome, reason = Outcome.LEFT, "The job left the queue before it started."
        elif engine_id in result.decisions:
            outcome, reason = _started(row.nominations or {}, placed.get(engine_id, {}))
        elif engine_id in preempting:
            outcome, reason = Outcome.PREEMPTED_AGAIN, _why_again(row, engine_id, result, index)
        elif engine_id in result.timeouts:
            outcome, reason = Outcome.GAVE_UP, result.timeouts[engine_id]
        else:
            continue
        row.outcome, row.outcome_reason, row.outcome_at = outcome, reason, now
        settled.append(row)
    if settled:
        Preemption.objects.bulk_update(settled, ["outcome", "outcome_reason", "outcome_at"])


def _number(new: list[Preemption]) -> None:
    """Each new preemption's `attempt`: its preemptor's earlier preemptions, plus one."""
    earlier = dict(
        Preemption.objects.filter(preemptor_id__in={row.preemptor_id for row in new})
        .exclude(id__in=[row.id for row in new])
        .values_list("preemptor_id")
        .annotate(n=Count("id"))
    )
    changed = []
    for row in new:
        attempt = earlier.get(row.preemptor_id, 0) + 1
        if attempt != row.attempt:
            row.attempt = attempt
            changed.append(row)
    if changed:
        Preemption.objects.bulk_update(changed, ["attempt"])


def _started(nominations: Mapping[str, str], placed: Mapping[str, str]) -> tuple[str, str]:
    elsewhere = sum(1 for key, node in placed.items() if nominations.get(key) != node)
    if not elsewhere:
        return Outcome.STARTED, f"All {len(placed)} pods started on their nominated nodes."
    return (
        Outcome.STARTED_ELSEWHERE,
        f"Started; {elsewhere} of {len(placed)} pods on other nodes than nominated.",
    )


def _why_again(row: Preemption, engine_id: str, result: RoundResult, index: SnapshotIndex) -> str:
    """Why the nominated nodes did not hold the preemptor, as far as the round can tell."""
    if engine_id in result.timeouts:
        return "Its waiting time ran out before the whole gang fitted; it preempted anew."
    victims = PreemptionVictim.objects.filter(preemption_id=row.id).values_list("pods", flat=True)
    still = sum(
        1
        for pods in victims
        for key in pods or []
        if (pod_id := index.pod_ids.get(str(key))) is not None
        and (pod := index.pod_rows.get(pod_id)) is not None
        and pod.node_id is not None
    )
    if still:
        return f"{still} of its victims' pods had not left; it preempted anew."
    return "The room its victims freed was taken before it could start; it preempted anew."
