"""A round's pipeline: leftover intents, then plan and commit, then enact and finish the record.

`round_execute` runs holding the cluster's round lock (tasks.run_round takes it), in two phases:
`_round_plan` (one transaction: sync, snapshot, back-off, the engine, the record and its plan as
intents, `records.py`) and `_round_finish` (after the commit: the plan's own actions enacted as
built, `outbox.py`; kubectl's notes, `pod_notes.py`; the Round row's metrics). A failure in
either is recorded as a failed round; after the commit its intents wait for the next round.

After its commit a round publishes its queue in the shared cache (`round_queue.py`, read by
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

from koordweb.backends.base import ClusterBackend
from koordweb.backends.intents import Written, intents_write
from koordweb.engine import assembly
from koordweb.engine import snapshot as snapshot_adapter
from koordweb.engine.backoff import HoldReport, backoff_forget, backoff_hold, backoff_record
from koordweb.engine.outbox import EnactSummary, RoundIntents, intents_enact
from koordweb.engine.pod_notes import pods_explain, round_notes
from koordweb.engine.profile import engine_profile
from koordweb.engine.records import quota_runtime, round_record
from koordweb.engine.round_queue import round_queue_publish
from koordweb.engine.warm import (
    WarmReport,
    warm_engine,
    warm_forget,
    warm_heap_settle,
    warm_snapshot,
)
from koordweb.models import (
    Cluster,
    Preemption,
    Round,
)
from koordweb.observability import round_context, round_id_set
from scheduler.api import Profile, RoundResult, collector_paused, plan_round
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
    this process (koordweb.engine.warm); a failed round forgets that state. `worker`: the
    Celery worker running it, named on the round's row (finished or failed)."""
    if warm is None:
        warm = bool(settings.KOORDWEB_WARM_SNAPSHOT)
    with round_context(cluster=cluster.name):
        planned: Planned | None = None
        try:
            # The whole round, not only its plan, makes objects that live until it returns.
            with collector_paused():
                planned = _round_plan(
                    cluster=cluster,
                    backend=backend,
                    trigger=trigger,
                    now=now,
                    warm=warm,
                    worker=worker,
                )
                return _round_finish(cluster, backend, planned, now)
        except Exception as error:
            # What the warm state read may have been rolled back: the next round builds cold,
            # and tries every job again.
            warm_forget(cluster.id)
            backoff_forget(cluster.id)
            round_record_failure(
                cluster=cluster,
                trigger=trigger,
                started=now,
                error=error,
                round_row=planned.round if planned is not None else None,
                worker=worker,
            )
            raise


@dataclass
class Planned:
    """A round planned and committed: its row, what the engine was given and answered, the plan
    as written, and the times so far (perf_counter, process_time)."""

    round: Round
    profile: Profile
    snapshot: ClusterSnapshot
    given: ClusterSnapshot
    index: snapshot_adapter.SnapshotIndex
    result: RoundResult
    preemptions: list[Preemption]
    written: list[Written]
    held: HoldReport
    made: WarmReport
    leftover: EnactSummary
    synced: Mapping[str, Any]
    warm: bool
    times: tuple[float, float, float, float, float]  # t0, cpu0, t1 (engine), t2, t3 (committed)


def _round_plan(
    *,
    cluster: Cluster,
    backend: ClusterBackend,
    trigger: str,
    now: datetime,
    warm: bool,
    worker: str | None,
) -> Planned:
    """Leftover intents enacted, then in one transaction: sync, snapshot, back-off, the engine,
    the record and the plan as intents. Nothing of the round remains if this fails."""
    profile = engine_profile(cluster)  # a bad configuration fails the round before any sync
    t0, cpu0 = perf_counter(), process_time()
    leftover = intents_enact(cluster=cluster, backend=backend, now=now)
    backend.prepare(cluster)
    with transaction.atomic():
        synced = backend.sync(cluster, now=now) or {}
        if warm:
            snapshot, index, made = warm_snapshot(cluster, now=now)
        else:
            snapshot, index = assembly.build_for_round(cluster, now=now)
            made = WarmReport("cold", reason="warm snapshot off")
        # Jobs backed off (unschedulable, nothing changed since) are left out of the engine's
        # input; they keep their last verdict (koordweb/engine/backoff.py).
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
        plan, preemptions = round_record(cluster, rnd, result, index, now)
        written = intents_write(cluster=cluster, round_id=rnd.id, plan=plan, now=now)
    t3 = perf_counter()
    return Planned(
        rnd,
        profile,
        snapshot,
        given,
        index,
        result,
        preemptions,
        written,
        held,
        made,
        leftover,
        synced,
        warm,
        (t0, cpu0, t1, t2, t3),
    )


def _round_finish(
    cluster: Cluster, backend: ClusterBackend, planned: Planned, now: datetime
) -> RoundOutcome:
    """After the commit: the back-off and the queue published, the round's own intents enacted
    as written, kubectl's notes, and the Round row finished with its metrics."""
    rnd, result, snapshot, index = planned.round, planned.result, planned.snapshot, planned.index
    held, made, leftover, synced = planned.held, planned.made, planned.leftover, planned.synced
    t0, cpu0, t1, t2, t3 = planned.times
    backoff_record(cluster.id, snapshot, result, held, planned.profile)
    round_queue_publish(cluster=cluster, rnd=rnd, result=result, index=index, held=held, now=now)
    # Pruned by the first call, before the plan's intents were written; the plan's own intents
    # are enacted as written (their actions, not read back), with their pods as the snapshot
    # read them.
    written = planned.written
    own = RoundIntents(rnd.id, written, index.pod_rows, _job_states(index, written))
    enacted = intents_enact(cluster=cluster, backend=backend, now=now, prune=False, own=own)
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
    rnd.preemption_count = len(planned.preemptions)
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
    if planned.warm:
        warm_heap_settle(made.mode)
    summary = {
        "round": rnd.id,
        "placed_pods": len(report.bound),
        "preemptions": len(planned.preemptions),
        "unschedulable": len(result.unschedulable),
        "duration_ms": rnd.duration_ms,
    }
    return RoundOutcome(rnd, result, summary, planned.given, planned.profile)


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
