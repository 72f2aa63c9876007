"""The outbox's settled intents and the bind write that goes from intent rows to pod rows.

An accepted bind puts the intent's node and annotations on its pod in the database (no value
passes through Python), and the intent is then deleted; a dropped intent stays with its reason.
A round enacts the intents it has just written as it wrote them (`RoundIntents`), together with
the others pending, in enact order.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from koordweb.backends.base import Binding, EnactPlan, EnactReport, Nomination
from koordweb.backends.intents import intents_write
from koordweb.backends.simulated import SimulatedBackend
from koordweb.engine.cluster_rows import PodRow
from koordweb.engine.outbox import RoundIntents, intents_enact
from koordweb.models import Intent, JobState, Pod, PodPhase, Round
from koordweb.rows.pods import pods_bind
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory

pytestmark = pytest.mark.django_db


def _binds(pods, nodes, payloads, now):
    """Pending bind intents written the way a round writes them."""
    plan = EnactPlan(
        tuple(
            Binding(p.id, p.namespace, p.name, p.uid, n, dict(payload.get("annotations", {})))
            for p, n, payload in zip(pods, nodes, payloads, strict=True)
        )
    )
    intents_write(cluster=pods[0].cluster, round_id=None, plan=plan, now=now)
    return {i.pod_id: i.id for i in Intent.objects.filter(pod__in=pods)}


def test_pods_bind_merges_annotations_and_spends_the_nomination() -> None:
    cluster = ClusterFactory()
    a, b = NodeFactory(cluster=cluster, name="a"), NodeFactory(cluster=cluster, name="b")
    job = JobFactory(cluster=cluster)
    kept = PodFactory(job=job, annotations={"keep": "me", "over": "old"}, nominated_node=b)
    bare = PodFactory(job=job)
    untouched = PodFactory(job=job, annotations={"x": "1"})
    now = timezone.now()
    intents = _binds(
        [kept, bare, untouched],
        ["a", "b", "a"],
        [{"annotations": {"over": "new", "q": 'say "x"'}}, {}, {"annotations": {"y": "2"}}],
        now,
    )
    assert pods_bind(intent_ids=[intents[kept.id], intents[bare.id]], now=now) == 2
    rows = {p.id: p for p in Pod.objects.filter(job=job)}
    assert rows[kept.id].node_id == a.id and rows[kept.id].nominated_node_id is None
    assert rows[kept.id].annotations == {"keep": "me", "over": "new", "q": 'say "x"'}
    assert rows[kept.id].bound_at == now
    assert (rows[bare.id].node_id, rows[bare.id].annotations) == (b.id, {})
    assert (rows[untouched.id].node_id, rows[untouched.id].annotations) == (None, {"x": "1"})
    assert pods_bind(intent_ids=[], now=now) == 0


def test_a_bind_to_a_node_of_another_cluster_writes_nothing() -> None:
    cluster, other = ClusterFactory(), ClusterFactory(name="other")
    NodeFactory(cluster=other, name="elsewhere")
    pod = PodFactory(job=JobFactory(cluster=cluster))
    now = timezone.now()
    intents = _binds([pod], ["elsewhere"], [{}], now)
    assert pods_bind(intent_ids=list(intents.values()), now=now) == 0
    assert Pod.objects.get(id=pod.id).node_id is None


class _Refusing(SimulatedBackend):
    """Accepts every binding but the pod named `refused`."""

    def __init__(self, refused: int) -> None:
        self.refused = refused

    def enact(self, cluster, plan, *, now):
        report: EnactReport = super().enact(cluster, plan, now=now)
        report.bound.remove(self.refused)
        report.dropped[self.refused] = "the node said no"
        return report


def test_enacted_intents_go_and_dropped_ones_stay_with_their_reason() -> None:
    cluster = ClusterFactory()
    NodeFactory(cluster=cluster, name="a")
    job = JobFactory(cluster=cluster)
    ok, refused = PodFactory(job=job), PodFactory(job=job)
    now = timezone.now()
    _binds([ok, refused], ["a", "a"], [{"annotations": {"k": "v"}}, {}], now)
    summary = intents_enact(cluster=cluster, backend=_Refusing(refused.id), now=now)
    assert (summary.intents, summary.dropped) == (2, 1)
    left = Intent.objects.get()
    assert (left.pod_id, left.state, left.outcome) == (refused.id, "dropped", "the node said no")
    assert Pod.objects.get(id=ok.id).annotations == {"k": "v"}
    assert Pod.objects.get(id=refused.id).node_id is None
    # A dropped intent is kept a day, then pruned by a later enact.
    intents_enact(cluster=cluster, backend=SimulatedBackend(), now=now + timedelta(days=2))
    assert not Intent.objects.exists()


def test_an_intent_whose_pod_is_gone_is_pruned_not_left_pending() -> None:
    from django.db import connection

    cluster = ClusterFactory()
    NodeFactory(cluster=cluster, name="a")
    kept, gone = PodFactory.create_batch(2, job=JobFactory(cluster=cluster))
    now = timezone.now()
    _binds([kept, gone], ["a", "a"], [{}, {}], now)
    with connection.cursor() as cursor:  # not through the ORM: no cascade
        cursor.execute("DELETE FROM koordweb_pod WHERE id = %s", [gone.id])
    summary = intents_enact(cluster=cluster, backend=SimulatedBackend(), now=now)
    assert summary.intents == 1 and not Intent.objects.exists()
    assert Pod.objects.get(id=kept.id).node is not None


def test_deleting_a_pod_through_the_orm_takes_its_intents() -> None:
    cluster = ClusterFactory()
    pod = PodFactory(job=JobFactory(cluster=cluster))
    _binds([pod], ["a"], [{}], timezone.now())
    Pod.objects.filter(id=pod.id).delete()
    assert not Intent.objects.exists()


class _Recording(SimulatedBackend):
    """The simulated cluster, keeping every plan it is asked to enact."""

    def __init__(self) -> None:
        self.plans: list[EnactPlan] = []

    def enact(self, cluster, plan, *, now):
        self.plans.append(plan)
        return super().enact(cluster, plan, now=now)


def _facts(pod: Pod, **changed: object) -> PodRow:
    """The pod as a round's snapshot read it (`changed`: what the round saw differently)."""
    values = {f: getattr(pod, f) for f in PodRow._fields if f not in ("job_id", "node_id")}
    values.update(job_id=pod.job_id, node_id=pod.node_id, nominated_node_id=None)
    values.update(changed)
    return PodRow(**values)


def test_a_rounds_own_intents_are_enacted_as_written_with_the_stored_ones_in_order() -> None:
    cluster = ClusterFactory()
    NodeFactory(cluster=cluster, name="a")
    NodeFactory(cluster=cluster, name="b")
    job = JobFactory(cluster=cluster, state=JobState.PENDING)
    stored, own_a, own_b, seen_terminating, unseen = PodFactory.create_batch(5, job=job)
    now = timezone.now()
    # Pending before the round wrote its own (by its sync, say): enacted in the same call.
    stored_binds = _binds([stored], ["b"], [{}], now)
    rnd = Round.objects.create(cluster=cluster, trigger="manual", started_at=now)
    plan = EnactPlan(
        tuple(
            Binding(p.id, p.namespace, p.name, p.uid, node, {"k": p.name})
            for p, node in ((own_a, "a"), (own_b, "b"), (seen_terminating, "a"), (unseen, "a"))
        ),
        nominations=(Nomination(own_b.id, own_b.namespace, own_b.name, "a"),),
    )
    written = intents_write(cluster=cluster, round_id=rnd.id, plan=plan, now=now)
    assert [w.kind for w in written] == ["bind"] * 4 + ["nominate"]
    pods = {p.id: _facts(p) for p in (own_a, own_b)}
    pods[seen_terminating.id] = _facts(seen_terminating, terminating=True)
    own = RoundIntents(rnd.id, written, pods, {job.id: JobState.PENDING})
    backend = _Recording()

    summary = intents_enact(cluster=cluster, backend=backend, now=now, prune=False, own=own)

    assert len(backend.plans) == 1
    assert [b.pod_id for b in backend.plans[0].bindings] == [stored.id, own_a.id, own_b.id]
    assert [n.pod_id for n in backend.plans[0].nominations] == [own_b.id]
    assert (summary.intents, summary.dropped) == (5, 1)
    rows = {p.id: p for p in Pod.objects.filter(job=job)}
    assert rows[own_a.id].node.name == "a" and rows[own_a.id].annotations == {"k": own_a.name}
    assert rows[stored.id].node.name == "b"
    # Taken as the round saw it: the pod was terminating, so its bind no longer applies.
    dropped = Intent.objects.get(state=Intent.State.DROPPED)
    assert (dropped.pod_id, dropped.outcome) == (
        seen_terminating.id,
        "the pod is no longer waiting",
    )
    # A pod the round did not hand over stays pending, for the next call, which binds it.
    assert list(Intent.objects.filter(state=Intent.State.PENDING).values_list("pod_id")) == [
        (unseen.id,)
    ]
    assert stored_binds[stored.id] not in set(Intent.objects.values_list("id", flat=True))
    intents_enact(cluster=cluster, backend=SimulatedBackend(), now=now)
    assert Pod.objects.get(id=unseen.id).node.name == "a"


def test_a_bind_accepted_after_the_pod_was_cancelled_leaves_the_pod_as_it_is() -> None:
    cluster = ClusterFactory()
    NodeFactory(cluster=cluster, name="a")
    job = JobFactory(cluster=cluster)
    running, gone = PodFactory.create_batch(2, job=job)
    now = timezone.now()
    intents = _binds([running, gone], ["a", "a"], [{}, {}], now)
    # Its job was cancelled between the plan and its enact: the pod failed, unbound.
    Pod.objects.filter(id=gone.id).update(phase=PodPhase.FAILED)
    assert pods_bind(intent_ids=list(intents.values()), now=now) == 1
    assert Pod.objects.get(id=gone.id).node_id is None
    assert Pod.objects.get(id=running.id).node_id is not None
