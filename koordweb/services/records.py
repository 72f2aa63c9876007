"""A round's pipeline and record: the engine's answer -> Round, Decision, Preemption rows and
the intents that enact it (koordweb.services.outbox).

`round_execute` runs holding the cluster's round lock (tasks.run_round takes it); a decision row is
written only when a job's outcome or reason changed since its last one, so a job that waits for an
hour does not write 360 identical rows.

After its commit a round publishes its queue in the shared cache (`services.round_queue`, read by
the jobs table, `selectors.job_table.job_queue_positions`): the waiting jobs' places in the order
the engine took them, and the jobs the back-off held out of the round (their place is unknown
until something changes for them).
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from time import perf_counter, process_time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from koordweb import snapshot as snapshot_adapter
from koordweb.backends.base import Binding, ClusterBackend, EnactPlan, Eviction, Nomination
from koordweb.backends.intents import Written, intents_write
from koordweb.models import (
    Cluster,
    Decision,
    Job,
    PodPhase,
    Preemption,
    PreemptionVictim,
    Round,
)
from koordweb.models.records import latest_decision
from koordweb.observability import round_context, round_id_set
from koordweb.rows.bulk import rows_insert
from koordweb.services.backoff import (
    backoff_forget,
    backoff_hold,
    backoff_record,
)
from koordweb.services.engine import engine_profile
from koordweb.services.gang_timeouts import gang_timeouts_record
from koordweb.services.outbox import RoundIntents, intents_enact
from koordweb.services.pod_notes import pods_explain, round_notes
from koordweb.services.preemption_outcomes import preemption_outcomes_record
from koordweb.services.round_queue import round_queue_publish
from koordweb.services.warm import (
    WarmReport,
    warm_engine,
    warm_forget,
    warm_heap_settle,
    warm_snapshot,
)
from koordweb.snapshot import JobRow, PodRow
from scheduler.api import PreemptionRecord, Profile, RoundResult, collector_paused, plan_round
from scheduler.model import ClusterSnapshot


@dataclass(frozen=True)
class RoundOutcome:
    round: Round
    result: RoundResult
    summary: dict[str, Any]
    # what the engine was given: `simulate --check` has the oracle check the result against it
    snapshot: ClusterSnapshot | None = None
    profile: Profile | None = None


def round_execute(
    *,
    cluster: Cluster,
    backend: ClusterBackend,
    trigger: str,
    now: datetime,
    warm: bool | None = None,
    worker: str | None = None,
) -> RoundOutcome:
    """One round: finish leftover intents, then plan and commit, then enact; recorded either way.

    Call holding the cluster's round lock (tasks.run_round takes it) and outside a transaction:
    the plan (sync, snapshot, engine, decisions, intents) commits in one transaction, and only
    then are the intents enacted, so no call to the cluster ever runs inside a transaction. A
    failure is recorded as a failed round: before the commit nothing of the round remains; after
    it the plan stays, and its pending intents are enacted by the next round before it plans.
    Every log line of the round carries its cluster and, once its row exists, its round id.

    `warm` (default KOORDWEB_WARM_SNAPSHOT): the snapshot comes from the cluster's warm state in
    this process (koordweb.services.warm); a failed round forgets that state. `worker`: the
    Celery worker running it, named on the round's row (finished or failed)."""
    if warm is None:
        warm = bool(settings.KOORDWEB_WARM_SNAPSHOT)
    with round_context(cluster=cluster.name):
        rnd: Round | None = None
        try:
            # The whole round, not only its plan, makes objects that live until it returns.
            with collector_paused():
                return _round_execute(
                    cluster=cluster,
                    backend=backend,
                    trigger=trigger,
                    now=now,
                    warm=warm,
                    worker=worker,
                )
        except Exception as error:
            # What the warm state read may have been rolled back: the next round builds cold,
            # and tries every job again.
            warm_forget(cluster.id)
            backoff_forget(cluster.id)
            rnd = getattr(error, "koordweb_round", None)
            round_record_failure(
                cluster=cluster,
                trigger=trigger,
                started=now,
                error=error,
                round_row=rnd,
                worker=worker,
            )
            raise


def _round_execute(
    *,
    cluster: Cluster,
    backend: ClusterBackend,
    trigger: str,
    now: datetime,
    warm: bool,
    worker: str | None,
) -> RoundOutcome:
    profile = engine_profile(cluster)  # a bad configuration fails the round before any sync
    t0, cpu0 = perf_counter(), process_time()
    leftover = intents_enact(cluster=cluster, backend=backend, now=now)
    backend.prepare(cluster)
    with transaction.atomic():
        synced = backend.sync(cluster, now=now) or {}
        if warm:
            snapshot, index, made = warm_snapshot(cluster, now=now)
        else:
            snapshot, index = snapshot_adapter.build_for_round(cluster, now=now)
            made = WarmReport("cold", reason="warm snapshot off")
        # Jobs backed off (unschedulable, nothing changed since) are left out of the engine's
        # input; they keep their last verdict (services/backoff.py).
        given, held = backoff_hold(cluster.id, snapshot, profile)
        t1 = perf_counter()
        if warm:
            result, made.engine_reused = warm_engine(cluster, given, profile, plan_round)
        else:
            result = plan_round(given, profile)
        t2 = perf_counter()
        rnd = Round.objects.create(
            cluster=cluster,
            trigger=trigger,
            started_at=now,
            number=round_number_next(cluster),
            worker=worker or "",
        )
        round_id_set(rnd.id)
        plan, preemptions = _record(cluster, rnd, result, index, now)
        written = intents_write(cluster=cluster, round_id=rnd.id, plan=plan, now=now)
    t3 = perf_counter()
    backoff_record(cluster.id, snapshot, result, held, profile)
    round_queue_publish(cluster=cluster, rnd=rnd, result=result, index=index, held=held, now=now)
    try:
        # Pruned by the call above, before the plan's intents were written; the plan's own
        # intents are enacted as written, with their pods as the snapshot read them.
        own = RoundIntents(rnd.id, written, index.pod_rows, _job_states(index, written))
        enacted = intents_enact(cluster=cluster, backend=backend, now=now, prune=False, own=own)
    except Exception as error:
        error.koordweb_round = rnd  # type: ignore[attr-defined]
        raise
    notes = [*leftover.notes, *enacted.notes, *round_notes(result, index, len(snapshot.nodes))]
    explained = pods_explain(cluster=cluster, backend=backend, notes=notes, now=now)
    t4, cpu4 = perf_counter(), process_time()
    report = enacted.report
    rnd.state = Round.State.SUCCEEDED
    rnd.finished_at = now + timedelta(seconds=t4 - t0)
    rnd.duration_ms = int((t4 - t0) * 1000)
    rnd.engine_ms = int((t2 - t1) * 1000)
    rnd.jobs_considered = int(result.metrics.get("jobs_considered", 0))
    rnd.jobs_placed = int(result.metrics.get("jobs_placed", 0))
    rnd.pods_bound = len(report.bound)
    rnd.preemption_count = len(preemptions)
    rnd.metrics = {
        "sync_snapshot_ms": int((t1 - t0) * 1000),
        "engine_ms": int((t2 - t1) * 1000),
        "record_enact_ms": int((t4 - t2) * 1000),
        "enact_ms": int((t4 - t3) * 1000),
        # This worker's CPU time in the round (the database server's is not in it): on a shared
        # machine wall time also counts waiting for a core.
        "cpu_ms": int((cpu4 - cpu0) * 1000),
        "pods_dropped": len(report.dropped),
        "evicted": len(report.evicted),
        "evictions_replaced": len(report.replaced),
        "intents": enacted.intents,
        "intents_dropped": enacted.dropped,
        # Actions the cluster refused (a 403, a webhook): each holds only its own job.
        "intents_refused": enacted.refused + leftover.refused,
        "explain_writes": explained,
        "leftover_intents": leftover.intents,
        "kubelet_rejections": int(synced.get("kubelet_rejections", 0)),
        "nodes": len(snapshot.nodes),
        "outside_topology": list(result.outside_topology),
        "runtime_quota": quota_runtime(result),
        **made.metrics(),
        **held.metrics(),
        **{k: int(v) for k, v in result.metrics.items()},
    }
    if report.dropped:
        rnd.metrics["dropped"] = {str(k): v for k, v in report.dropped.items()}
    rnd.save()
    if warm:
        warm_heap_settle(made.mode)
    summary = {
        "round": rnd.id,
        "placed_pods": len(report.bound),
        "preemptions": len(preemptions),
        "unschedulable": len(result.unschedulable),
        "duration_ms": rnd.duration_ms,
    }
    return RoundOutcome(rnd, result, summary, given, profile)


def _job_states(
    index: snapshot_adapter.SnapshotIndex, written: Sequence[Written]
) -> dict[int, str]:
    """The state of each job the intents' pods belong to, as the snapshot read it."""
    jobs = {index.pod_rows[w.pod_id].job_id for w in written if w.pod_id in index.pod_rows}
    return {
        job.id: job.state
        for members in index.jobs_by_engine_id.values()
        for job in members
        if job.id in jobs
    }


def quota_runtime(result: RoundResult) -> dict[str, dict[str, int]]:
    """Runtime quota per quota at the start of the round, as the engine admitted by it."""
    return {quota: dict(amounts) for quota, amounts in result.runtime_quota.items()}


def round_record_failure(
    *,
    cluster: Cluster,
    trigger: str,
    started: datetime,
    error: BaseException,
    round_row: Round | None = None,
    worker: str | None = None,
) -> Round:
    """A failed round: its committed row marked failed, or a new row when nothing committed
    (naming the worker that ran it)."""
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    with transaction.atomic():
        if round_row is not None:
            round_row.state = Round.State.FAILED
            round_row.finished_at = started
            round_row.error = f"enacting the plan failed (it is retried by the next round): {text}"[
                :4000
            ]
            round_row.save(update_fields=["state", "finished_at", "error"])
            return round_row
        return Round.objects.create(
            cluster=cluster,
            number=round_number_next(cluster),
            trigger=trigger,
            started_at=started,
            finished_at=started,
            state=Round.State.FAILED,
            error=text[:4000],
            worker=worker or "",
        )


def round_number_next(cluster: Cluster) -> int:
    """The next round's number in the cluster's own count (rounds of a cluster run one at a
    time under the round lock, so the highest number so far is this cluster's last)."""
    last = Round.objects.filter(cluster=cluster).aggregate(last=Max("number"))["last"]
    return (last or 0) + 1


def _record(
    cluster: Cluster,
    rnd: Round,
    result: RoundResult,
    index: snapshot_adapter.SnapshotIndex,
    now: datetime,
) -> tuple[EnactPlan, list[Preemption]]:
    # The snapshot's own rows (plain values): no model instance per pod.
    pods = index.pod_rows
    bindings = []
    for key, placement in sorted(result.placements.items()):
        pod = pods[index.pod_ids[key]]
        bindings.append(
            Binding(
                pod_id=pod.id,
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                node=placement.node,
                annotations=dict(placement.annotations),
            )
        )
    plain = _plain_parts(result)
    decisions: list[tuple[JobRow, str, str, dict[str, Any]]] = []
    placed_by_job: dict[str, dict[str, str]] = {}
    for key, placement in result.placements.items():
        placed_by_job.setdefault(index.job_by_pod_key.get(key, ""), {})[key] = placement.node
    for job_id, why in plain["decisions"].items():
        placed = placed_by_job.get(job_id, {})
        for job in index.jobs_by_engine_id.get(job_id, []):
            details = {**why, "placements": placed}
            decisions.append((job, Decision.Outcome.PLACED, _placed_reason(why), details))
    preempting = {p.preemptor for p in result.preemptions}
    for job_id, verdict in result.unschedulable.items():
        outcome = (
            Decision.Outcome.PREEMPTING
            if job_id in preempting
            else (
                Decision.Outcome.WAITING
                if verdict.code == "Wait"
                else Decision.Outcome.UNSCHEDULABLE
            )
        )
        for job in index.jobs_by_engine_id.get(job_id, []):
            details = plain["unschedulable"][job_id]["details"]
            decisions.append((job, outcome, verdict.reason, details))
    _write_decisions(rnd, decisions, now)
    if result.timeouts:
        timed_out = {j.id for k in result.timeouts for j in index.jobs_by_engine_id.get(k, [])}
        rows = Job.objects.in_bulk(list(timed_out))
        gang_timeouts_record(
            timeouts=result.timeouts,
            jobs={
                k: [rows[j.id] for j in index.jobs_by_engine_id.get(k, []) if j.id in rows]
                for k in result.timeouts
            },
        )

    evictions: list[Eviction] = []
    nominations: list[Nomination] = []
    records: list[Preemption] = []
    for record, record_plain in zip(result.preemptions, plain["preemptions"], strict=True):
        preemptor_jobs = index.jobs_by_engine_id.get(record.preemptor, [])
        if not preemptor_jobs:
            continue
        row = Preemption.objects.create(
            cluster=cluster,
            round=rnd,
            preemptor_id=preemptor_jobs[0].id,
            reason=record.reason,
            cost={**record_plain["cost"], **_preemption_rule(record, preemptor_jobs[0].priority)},
            nominations=dict(record.nominations),
            created_at=now,
        )
        records.append(row)
        victim_pods_by_job: dict[str, list[str]] = {}
        for key in record.victim_pods:
            victim_pods_by_job.setdefault(index.job_by_pod_key.get(key, ""), []).append(key)
        for victim_id in record.victim_jobs:
            keys = sorted(victim_pods_by_job.get(victim_id, []))
            for job in index.jobs_by_engine_id.get(victim_id, []):
                own = [
                    pods[index.pod_ids[k]]
                    for k in keys
                    if index.pod_ids.get(k) in pods and pods[index.pod_ids[k]].job_id == job.id
                ]
                freed: dict[str, int] = {}
                for pod in own:
                    for resource, amount in pod.requests.items():
                        freed[resource] = freed.get(resource, 0) + int(amount)
                PreemptionVictim.objects.create(
                    preemption=row,
                    job_id=job.id,
                    pods=[f"{p.namespace}/{p.name}" for p in own],
                    freed=freed,
                )
        for key in record.victim_pods:
            victim = pods.get(index.pod_ids.get(key, -1))
            if victim is not None and victim.phase in (PodPhase.PENDING, PodPhase.RUNNING):
                evictions.append(
                    Eviction(
                        victim.id,
                        victim.namespace,
                        victim.name,
                        record.preemptor,
                        row.id,
                        victim.uid,
                    )
                )
        for key, node in sorted(record.nominations.items()):
            nominee = pods.get(index.pod_ids.get(key, -1))
            if nominee is not None:
                nominations.append(Nomination(nominee.id, nominee.namespace, nominee.name, node))
    nominations += _nominations_given_up(result, index, pods, preempting)
    preemption_outcomes_record(cluster=cluster, result=result, index=index, new=records, now=now)
    return EnactPlan(tuple(bindings), tuple(evictions), tuple(nominations)), records


def _plain_parts(result: RoundResult) -> dict[str, Any]:
    """The parts of `result.to_dict()` a record needs (decisions, unschedulable, preemptions),
    without turning the topology status of every domain into plain data each round."""
    parts = RoundResult(
        placements={},
        preemptions=result.preemptions,
        unschedulable=result.unschedulable,
        decisions=result.decisions,
    ).to_dict()
    return {k: parts[k] for k in ("decisions", "unschedulable", "preemptions")}


def _nominations_given_up(
    result: RoundResult,
    index: snapshot_adapter.SnapshotIndex,
    pods: Mapping[int, PodRow],
    preempting: set[str],
) -> list[Nomination]:
    """A job still not placed when its waiting time has passed (the engine's `timeouts`) gives
    its nominations up, unless it preempts anew this round: an empty node clears the
    nomination, in the database and in the cluster (`status.nominatedNodeName`)."""
    given_up = {job_id for job_id in result.unschedulable if job_id in result.timeouts} - preempting
    if not given_up:
        return []
    return [
        Nomination(pod.id, pod.namespace, pod.name, "")
        for key, pod_id in sorted(index.pod_ids.items())
        if index.job_by_pod_key.get(key) in given_up
        and (pod := pods.get(pod_id)) is not None
        and pod.nominated_node_id is not None
        and pod.node_id is None
    ]


def _preemption_rule(record: PreemptionRecord, priority: int) -> dict[str, Any]:
    """The rule the engine applied (`record.rule`: LowerPriority, InQuota, QuotaReclaim) and the
    preemptor's priority, kept beside the engine's cost as data; `presenters.reasons` words them
    (migration 0011 turned the prefix older records carried in their reason into these)."""
    return {"rule": record.rule, "preemptor_priority": int(priority)}


def _write_decisions(
    rnd: Round, decisions: list[tuple[JobRow, str, str, dict[str, Any]]], now: datetime
) -> None:
    """Insert a decision only where the outcome or the reason changed since the job's last one
    (plain values in a multi-row insert: no model instance per decision)."""
    if not decisions:
        return
    ids = [job.id for job, *_ in decisions]
    last = {
        row[0]: (row[1], row[2])
        for row in Job.objects.filter(id__any=ids)
        .order_by()
        .annotate(last_outcome=latest_decision("outcome"), last_reason=latest_decision("reason"))
        .values_list("id", "last_outcome", "last_reason")
    }
    rows = [
        (rnd.id, job.id, outcome, reason, details, now)
        for job, outcome, reason, details in decisions
        if outcome == Decision.Outcome.PLACED or last.get(job.id) != (outcome, reason)
    ]
    rows_insert(Decision, _DECISION_FIELDS, rows)


_DECISION_FIELDS = ("round", "job", "outcome", "reason", "details", "created_at")


def _placed_reason(why: Mapping[str, Any]) -> str:
    """One line: the domain chosen and how many slots it and the alternatives offered."""
    domain = why.get("chosen_domain")
    if not domain:
        return "placed"
    others = len(why.get("alternatives") or {}) - 1
    text = f"placed in {domain} ({why.get('chosen_offer_slots')} slots for "
    text += f"{why.get('desired_offer_slots')} pods"
    return text + (f"; {others} other candidate domains)" if others > 0 else ")")
