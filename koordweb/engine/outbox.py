"""The round's outbox: intents written with the plan, enacted after it commits, then gone.

`backends.intents.intents_write` writes them inside the round's transaction; `intents_enact` runs
after it, outside any transaction: it takes the round's own intents as they were written, with
their pods as the round's snapshot read them (`RoundIntents`: never read back), reads the other
pending ones (left by an earlier round, or written by the sync), puts them all in enact order,
asks the backend to apply them (cluster calls only), then records the outcomes in one short
transaction per chunk (`backend.enact_chunk` intents): an intent done is deleted in it (what it
did is in the pod's and the job's rows and the round's counts), one dropped is kept a day with
the cluster's reason.
Pending intents left by a worker that died are enacted by the next round before it plans; every
action is idempotent, so a chunk enacted twice binds, evicts or creates nothing twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol, cast

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from koordweb.backends.base import (
    Binding,
    ClusterBackend,
    Creation,
    Deletion,
    EnactPlan,
    EnactReport,
    Eviction,
    Nomination,
    PodNote,
)
from koordweb.backends.intents import Action, Written
from koordweb.engine.pod_notes import enact_notes
from koordweb.models import Cluster, Intent, Job, JobState, Node, Pod, Preemption
from koordweb.models.outbox import STEPS, PodManifest
from koordweb.rows import pods as pod_services
from koordweb.rows.bulk import rows_delete, rows_set, rows_write
from koordweb.rows.read import rows_read
from scheduler.vocabulary import FINISHED_POD_PHASES

KEEP_DROPPED = timedelta(days=1)  # dropped ones carry the cluster's reason: kept longer
# An action the cluster refused is tried this many times in all, the waits between tries
# doubling from REFUSED_BACKOFF; a refused binding is not tried again (the next round plans
# its pod afresh, as kube-scheduler requeues a pod whose binding failed).
INTENT_ATTEMPTS = 3
REFUSED_BACKOFF = timedelta(seconds=30)


@dataclass
class EnactSummary:
    """What one call of `intents_enact` did, over every chunk."""

    report: EnactReport
    intents: int = 0
    dropped: int = 0
    refused: int = 0  # actions the cluster refused (each fails only its own job)
    notes: list[PodNote] = field(default_factory=list)  # what kubectl should show of it


class _Pending(NamedTuple):
    """A pending intent with what deciding whether it still applies needs of its pod."""

    id: int
    kind: str
    node: str
    uid: str
    payload: dict[str, Any]
    pod_id: int
    namespace: str
    name: str
    pod_uid: str
    phase: str
    terminating: bool
    on_node: int | None
    job_id: int
    job_state: str
    attempts: int = 0
    action: Action | None = None  # the plan's own action (a round's intents), else rebuilt


_PENDING_FIELDS = (
    "id",
    "kind",
    "node",
    "uid",
    "payload",
    "pod_id",
    "pod__namespace",
    "pod__name",
    "pod__uid",
    "pod__phase",
    "pod__terminating",
    "pod__node_id",
    "pod__job_id",
    "pod__job__state",
    "attempts",
)


class PodFacts(Protocol):
    """What deciding whether an intent still applies needs of its pod (a snapshot's pod row)."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def terminating(self) -> bool: ...
    @property
    def node_id(self) -> int | None: ...
    @property
    def job_id(self) -> int: ...


@dataclass(frozen=True)
class RoundIntents:
    """The intents a round has just committed, with its snapshot's rows of their pods and jobs:
    the round enacts them as it wrote them, without reading them back."""

    round_id: int
    written: Sequence[Written]
    pods: Mapping[int, PodFacts]
    job_states: Mapping[int, str]


def intents_enact(
    *,
    cluster: Cluster,
    backend: ClusterBackend,
    now: datetime,
    prune: bool = True,
    own: RoundIntents | None = None,
) -> EnactSummary:
    """Enact every pending intent of the cluster, oldest round first, in enact order.

    `prune`: first delete the settled intents past their keeping time and the orphans (a round
    prunes in its first call, before it plans, when few intents are pending). `own`: the
    intents the calling round has just written, taken as they are; the others pending are read
    (those the round's sync wrote, say), and all go in enact order. Intents written while this
    runs are left to the next call."""
    summary = EnactSummary(EnactReport())
    if prune:
        _prune(cluster, now)
    if own is not None:
        batch = sorted(
            [*_own_pending(own), *_stored_pending(cluster, now, other_than=own.round_id)],
            key=_enact_order,
        )
        for start in range(0, len(batch), backend.enact_chunk):
            _enact_batch(cluster, backend, batch[start : start + backend.enact_chunk], now, summary)
        return summary
    while True:
        batch = _stored_pending(cluster, now, limit=backend.enact_chunk)
        if not batch:
            return summary
        _enact_batch(cluster, backend, batch, now, summary)


def _stored_pending(
    cluster: Cluster, now: datetime, *, limit: int | None = None, other_than: int | None = None
) -> list[_Pending]:
    """Pending intents as stored and due (a refused one waits out its back-off), in enact
    order: the first `limit`, or all but round `other_than`'s."""
    pending = Intent.objects.filter(cluster=cluster, state=Intent.State.PENDING).filter(
        Q(not_before__isnull=True) | Q(not_before__lte=now)
    )
    if other_than is not None:
        pending = pending.exclude(round_id=other_than)
    rows = pending.order_by("step", "id").values_list(*_PENDING_FIELDS)
    return [_Pending(*row) for row in rows_read(rows[:limit] if limit else rows)]


def _own_pending(own: RoundIntents) -> list[_Pending]:
    """The round's intents with their pods as its snapshot read them (an intent whose pod the
    snapshot lacks stays pending for the next call)."""
    out = []
    for it in own.written:
        pod = own.pods.get(it.pod_id)
        if pod is not None:
            job_state = own.job_states.get(pod.job_id, "")
            out.append(
                _Pending(
                    *(it.id, it.kind, it.node, it.uid, it.payload, it.pod_id),
                    *(pod.namespace, pod.name, pod.uid, pod.phase, pod.terminating),
                    *(pod.node_id, pod.job_id, job_state),
                    0,
                    it.action,
                )
            )
    return out


_STEP_OF = {kind.value: step for kind, step in STEPS.items()}


def _enact_order(intent: _Pending) -> tuple[int, int]:
    return _STEP_OF[intent.kind], intent.id


def _enact_batch(
    cluster: Cluster,
    backend: ClusterBackend,
    batch: Sequence[_Pending],
    now: datetime,
    summary: EnactSummary,
) -> None:
    """Enact one chunk of intents: the cluster first, then its answer recorded and the intents
    settled in one transaction."""
    # Not through cluster.nodes: a related manager would set each row's deferred cluster.
    names = Node.objects.filter(cluster_id=cluster.id).order_by().values_list("name", "id")
    nodes = dict(rows_read(names))
    plan, settled = _plan_of(batch, set(nodes))
    report = _enact_isolated(cluster, backend, plan, now) if len(plan) else EnactReport()
    with transaction.atomic():
        pods = {it.pod_id: it for it in batch}
        binds = {it.pod_id: it.id for it in batch if it.kind == Intent.Kind.BIND}
        _enact_record(
            cluster_nodes=nodes, pods=pods, binds=binds, plan=plan, report=report, now=now
        )
        _preemption_states(plan, report)
        summary.dropped += _settle(batch, report, settled, now)
        summary.refused += _jobs_hold(batch, report, now)
        _manifests_keep(report)
    summary.intents += len(batch)
    summary.notes += enact_notes(plan, report, {i: n for n, i in nodes.items()}, batch)
    _merge(summary.report, report)


def _enact_isolated(
    cluster: Cluster, backend: ClusterBackend, plan: EnactPlan, now: datetime
) -> EnactReport:
    """`backend.enact`, with one action the cluster refuses failing only itself: the chunk is
    enacted again action by action (each is idempotent), and what the cluster refuses is in
    the report's `refused`. A cluster that cannot be reached still fails the round."""
    try:
        return backend.enact(cluster, plan, now=now)
    except Exception as error:
        if _refusal(backend, error) is None:
            raise
    report = EnactReport()
    for kind, pod_id, single in _single_actions(plan):
        try:
            part = backend.enact(cluster, single, now=now)
        except Exception as error:
            words = _refusal(backend, error)
            if words is None:
                raise
            report.refused[(kind, pod_id)] = words
            continue
        _merge(report, part)
    return report


def _refusal(backend: ClusterBackend, error: Exception) -> str | None:
    says = getattr(backend, "refusal", None)  # test doubles may not implement it
    return says(error) if says is not None else None


def _single_actions(plan: EnactPlan) -> list[tuple[str, int, EnactPlan]]:
    """Every action of a plan as a plan of its own, in enact order, with its kind and pod."""
    return [
        *((Intent.Kind.CREATE.value, c.pod_id, EnactPlan(creations=(c,))) for c in plan.creations),
        *((Intent.Kind.BIND.value, b.pod_id, EnactPlan(bindings=(b,))) for b in plan.bindings),
        *((Intent.Kind.EVICT.value, e.pod_id, EnactPlan(evictions=(e,))) for e in plan.evictions),
        *(
            (Intent.Kind.NOMINATE.value, n.pod_id, EnactPlan(nominations=(n,)))
            for n in plan.nominations
        ),
        *((Intent.Kind.DELETE.value, d.pod_id, EnactPlan(deletions=(d,))) for d in plan.deletions),
    ]


def _plan_of(
    intents: Sequence[_Pending], nodes: set[str]
) -> tuple[EnactPlan, dict[int, tuple[str, str]]]:
    """The plan of the intents that still apply; the others settled at once (state, outcome)."""
    creations: list[Creation] = []
    bindings: list[Binding] = []
    evictions: list[Eviction] = []
    nominations: list[Nomination] = []
    deletions: list[Deletion] = []
    settled: dict[int, tuple[str, str]] = {}
    for it in intents:
        finished = it.phase in FINISHED_POD_PHASES
        job_over = it.job_state in JobState.FINAL
        kind = it.kind
        if kind == Intent.Kind.CREATE:
            if it.pod_uid:
                settled[it.id] = (Intent.State.DONE, "already created")
            elif job_over or finished:
                settled[it.id] = (Intent.State.DROPPED, "the job is over")
            else:
                creations.append(cast(Creation, _action_of(it)))
        elif kind == Intent.Kind.BIND:
            if finished or job_over or it.terminating:
                settled[it.id] = (Intent.State.DROPPED, "the pod is no longer waiting")
            elif it.node not in nodes:
                settled[it.id] = (Intent.State.DROPPED, f"node {it.node} is gone")
            else:
                bindings.append(cast(Binding, _action_of(it)))
        elif kind == Intent.Kind.EVICT:
            if finished:
                settled[it.id] = (Intent.State.DONE, "already gone")
            else:
                evictions.append(cast(Eviction, _action_of(it)))
        elif kind == Intent.Kind.NOMINATE:
            if finished or it.on_node is not None or (it.node and it.node not in nodes):
                settled[it.id] = (Intent.State.DROPPED, "the pod is no longer waiting")
            else:
                nominations.append(cast(Nomination, _action_of(it)))
        elif finished and not it.pod_uid:
            settled[it.id] = (Intent.State.DONE, "already gone")
        else:
            deletions.append(cast(Deletion, _action_of(it)))
    plan = EnactPlan(
        tuple(bindings),
        tuple(evictions),
        tuple(nominations),
        tuple(creations),
        tuple(deletions),
    )
    return plan, settled


def _action_of(it: _Pending) -> Action:
    """The intent's action: the plan's own when the round that built it enacts it, else made
    from the stored intent and its pod (an earlier round's, a sync's, a cancellation's)."""
    if it.action is not None:
        return it.action
    kind = it.kind
    if kind == Intent.Kind.CREATE:
        return Creation(it.pod_id, it.job_id, it.namespace, it.name)
    if kind == Intent.Kind.BIND:
        return Binding(
            it.pod_id,
            it.namespace,
            it.name,
            it.uid or it.pod_uid,
            it.node,
            dict(it.payload.get("annotations") or {}),
            dict(it.payload.get("labels") or {}),
        )
    if kind == Intent.Kind.EVICT:
        preemptor = str(it.payload.get("preemptor") or "")
        record = it.payload.get("preemption")
        return Eviction(it.pod_id, it.namespace, it.name, preemptor, record, it.uid)
    if kind == Intent.Kind.NOMINATE:
        return Nomination(it.pod_id, it.namespace, it.name, it.node)
    return Deletion(it.pod_id, it.namespace, it.name, it.uid or it.pod_uid)


def _outcome(intent: _Pending, report: EnactReport, accepted: _Accepted) -> tuple[str, str]:
    pod_id, kind = intent.pod_id, intent.kind
    failed: str | None = None
    if kind == Intent.Kind.CREATE:
        if pod_id not in report.created:
            failed = report.refused_jobs.get(intent.job_id, "not created")
    elif kind == Intent.Kind.BIND:
        failed = report.dropped.get(pod_id) if pod_id not in accepted.bound else None
    elif kind == Intent.Kind.EVICT:
        failed = report.blocked.get(pod_id) or report.replaced.get(pod_id)
    elif kind == Intent.Kind.NOMINATE:
        failed = None if pod_id in accepted.nominated else "the pod is gone"
    elif pod_id not in accepted.deleted:
        failed = "not deleted"
    return (Intent.State.DROPPED, failed) if failed else (Intent.State.DONE, "")


class _Accepted(NamedTuple):
    """The report's lists as sets, for one look-up per intent."""

    bound: set[int]
    nominated: set[int]
    deleted: set[int]


def _settle(
    intents: Iterable[_Pending],
    report: EnactReport,
    settled: dict[int, tuple[str, str]],
    now: datetime,
) -> int:
    """Settle the intents: the done ones deleted, the dropped ones marked with their reason (one
    UPDATE per distinct reason). Returns how many were dropped."""
    done: list[int] = []
    dropped: dict[str, list[int]] = defaultdict(list)
    accepted = _Accepted(set(report.bound), set(report.nominated), set(report.deleted))
    for intent in intents:
        words = report.refused.get((intent.kind, intent.pod_id))
        if words is not None and intent.id not in settled:
            if _tried_again(intent):
                _retry_later(intent, words, now)
                continue
            settled[intent.id] = (Intent.State.DROPPED, _refused_words(intent, words))
        state, outcome = settled.get(intent.id) or _outcome(intent, report, accepted)
        if state == Intent.State.DONE:
            done.append(intent.id)
        else:
            dropped[outcome[:2000]].append(intent.id)
    rows_delete(Intent, done)
    for outcome, ids in dropped.items():
        rows_set(Intent, ids, state=Intent.State.DROPPED, outcome=outcome, done_at=now)
    return sum(len(ids) for ids in dropped.values())


def _tried_again(intent: _Pending) -> bool:
    """Whether a refused intent gets another try (not a binding: its pod is planned afresh)."""
    return intent.kind != Intent.Kind.BIND and intent.attempts + 1 < INTENT_ATTEMPTS


def _retry_later(intent: _Pending, words: str, now: datetime) -> None:
    attempts = intent.attempts + 1
    Intent.objects.filter(id=intent.id).update(
        attempts=attempts,
        not_before=now + REFUSED_BACKOFF * 2 ** (attempts - 1),
        outcome=f"refused by the cluster, tried again later: {words}"[:2000],
    )


def _refused_words(intent: _Pending, words: str) -> str:
    tries = intent.attempts + 1
    return f"refused by the cluster ({tries} {'try' if tries == 1 else 'tries'}): {words}"[:2000]


def _jobs_hold(intents: Sequence[_Pending], report: EnactReport, now: datetime) -> int:
    """Each job an action was refused for says so in its state reason (it alone is held: the
    round and every other job go on). Returns how many actions were refused."""
    held: dict[int, str] = {}
    for it in intents:
        words = report.refused.get((it.kind, it.pod_id))
        if words is None or it.job_id in held:
            continue
        text = f"held: the cluster refused to {it.kind} pod {it.namespace}/{it.name}: {words}"
        if _tried_again(it):
            wait = REFUSED_BACKOFF * 2**it.attempts
            text += f" (tried again in {int(wait.total_seconds())} s)"
        elif it.kind != Intent.Kind.BIND:
            text += f" (given up after {INTENT_ATTEMPTS} tries)"
        held[it.job_id] = text[:4000]
    for job in Job.objects.filter(id__in=list(held)).exclude(state__in=JobState.FINAL):
        job.state_reason = held[job.id]
        job.save(update_fields=["state_reason"])
    return sum(1 for it in intents if (it.kind, it.pod_id) in report.refused)


def _manifests_keep(report: EnactReport) -> None:
    """The pods created, as the API server stored them: what creating them again starts from."""
    for pod_id, document in report.manifests.items():
        PodManifest.objects.update_or_create(pod_id=pod_id, defaults={"document": document})


def _preemption_states(plan: EnactPlan, report: EnactReport) -> None:
    """A preemption is enacted when its evictions were accepted, blocked when a budget refused."""
    by_record: dict[int, list[Eviction]] = defaultdict(list)
    for eviction in plan.evictions:
        if eviction.preemption_id is not None:
            by_record[eviction.preemption_id].append(eviction)
    for record in Preemption.objects.filter(id__in=list(by_record)):
        evictions = by_record[record.id]
        blocked = [report.blocked[e.pod_id] for e in evictions if e.pod_id in report.blocked]
        blocked += [
            f"the cluster refused the eviction of {e.namespace}/{e.name}: "
            + report.refused[(Intent.Kind.EVICT.value, e.pod_id)]
            for e in evictions
            if (Intent.Kind.EVICT.value, e.pod_id) in report.refused
        ]
        replaced = [e for e in evictions if e.pod_id in report.replaced]
        if blocked:
            record.state = Preemption.State.BLOCKED
            record.reason = f"{record.reason}; blocked: {blocked[0]}"
        elif replaced:
            names = ", ".join(f"{e.namespace}/{e.name}" for e in replaced[:3])
            record.reason = (
                f"{record.reason}; {names} was replaced by a new pod of the same name before "
                "its eviction, so it was not evicted: the next round plans again"
            )
            if any(e.pod_id in report.evicted for e in evictions):
                record.state = Preemption.State.ENACTED
        else:
            record.state = Preemption.State.ENACTED
        record.save(update_fields=["state", "reason"])


def _merge(total: EnactReport, part: EnactReport) -> None:
    total.bound += part.bound
    total.evicted += part.evicted
    total.nominated += part.nominated
    total.deleted += part.deleted
    for name in ("dropped", "blocked", "replaced", "created", "refused_jobs", "refused"):
        getattr(total, name).update(getattr(part, name))
    total.manifests.update(part.manifests)


def _prune(cluster: Cluster, now: datetime) -> None:
    """Settled intents past their keeping time go (dropped ones; done ones an older version
    kept), and so do intents whose pod is gone (the ORM deletes them with their pod; a pod
    deleted by other means leaves them, and the enact, which reads intents with their pods,
    would never see them)."""
    Intent.objects.filter(cluster=cluster, done_at__lt=now - KEEP_DROPPED).exclude(
        state=Intent.State.PENDING
    ).delete()
    Intent.objects.filter(cluster=cluster).exclude(
        Exists(Pod.objects.filter(id=OuterRef("pod_id")))
    ).delete()


def _enact_record(
    *,
    cluster_nodes: dict[str, int],
    pods: dict[int, _Pending],
    binds: dict[int, int],
    plan: EnactPlan,
    report: EnactReport,
    now: datetime,
) -> None:
    """Write down what the cluster accepted of a plan (whichever backend enacted it): plain
    values in batched writes, model instances only for the few evicted pods and their jobs.
    `pods`: the plan's pods as its intents were read; `binds`: pod id -> its bind intent."""
    rows_write(Pod, ["uid"], [(i, uid) for i, uid in report.created.items() if i in pods])
    for job in Job.objects.filter(id__in=list(report.refused_jobs)):
        pod_services.job_mark_failed(job=job, reason=report.refused_jobs[job.id], now=now)
    evicted = set(report.evicted)
    victims = Pod.objects.filter(
        id__in=[e.pod_id for e in plan.evictions if e.pod_id in evicted]
    ).only("id", "job_id", "phase", "terminating", "terminating_since", "nominated_node_id")
    victims_by_id = {p.id: p for p in victims}
    pod_services.pods_terminating(
        pods=[p for p in victims_by_id.values() if p.phase not in FINISHED_POD_PHASES],
        now=now,
    )
    victim_jobs = {
        victims_by_id[e.pod_id].job_id for e in plan.evictions if e.pod_id in victims_by_id
    }
    for job in Job.objects.filter(id__in=list(victim_jobs)):
        pod_services.job_mark_preempting(job=job)
    bound = {i for i in report.bound if i in binds}
    pod_services.pods_bind(intent_ids=[binds[i] for i in bound], now=now)
    nominated = set(report.nominated)
    rows_write(
        Pod,
        ["nominated_node", "nominated_at"],
        [
            (n.pod_id, cluster_nodes.get(n.node), now if n.node else None)  # "" gives it up
            for n in plan.nominations
            if n.pod_id in nominated
            and n.pod_id in pods
            and pods[n.pod_id].on_node is None
            and (not n.node or n.node in cluster_nodes)
        ],
    )
    touched = {pods[i].job_id for i in bound}
    jobs = Job.objects.filter(id__any=list(touched)).order_by().only(*pod_services.JOB_STATE_FIELDS)
    pod_services.job_refresh_states(jobs=jobs, now=now)
