"""Scheduling rounds end to end on the simulated backend: sync, engine, records, enact."""

from __future__ import annotations

import contextlib
import threading
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from koordweb.backends.simulated import SimulatedBackend
from koordweb.engine.pipeline import round_execute
from koordweb.engine.profile import engine_profile
from koordweb.models import (
    Cluster,
    Decision,
    Intent,
    Job,
    JobState,
    Pod,
    PodPhase,
    Preemption,
    Round,
)
from koordweb.services.locks import round_lock
from koordweb.tasks import run_round
from tests.builders import busy_cluster, nlp_submits, simulated_round, urgent_spine_gang

GI = 1024**3


@pytest.fixture
def busy(db, settings) -> Cluster:
    settings.KOORDWEB_CLUSTER = "default"
    return busy_cluster().cluster


def test_first_round_places_every_pending_job_whole(busy):
    pending = list(busy.jobs.filter(state=JobState.PENDING))
    assert pending
    summary = run_round(busy.id)
    assert summary["placed_pods"] == sum(j.pods.count() for j in pending)
    for job in pending:
        job.refresh_from_db()
        nodes = [p.node_id for p in job.pods.all()]
        assert all(nodes), f"{job} was placed partly"
        assert job.state == JobState.SCHEDULED
    rnd = Round.objects.get(id=summary["round"])
    assert rnd.state == Round.State.SUCCEEDED
    assert rnd.jobs_placed == len(pending)
    assert Decision.objects.filter(round=rnd, outcome=Decision.Outcome.PLACED).count() == len(
        pending
    )


def test_must_gather_block_lands_in_one_block(busy):
    run_round(busy.id)
    job = Job.objects.get(name="detector-sweep")
    blocks = {p.node.labels["network.topology.nvidia.com/block"] for p in job.pods.all()}
    assert len(blocks) == 1
    decision = job.decisions.get(outcome=Decision.Outcome.PLACED)
    assert decision.details["chosen_domain"].startswith("BlockLayer/")
    assert decision.reason.startswith("placed in BlockLayer/")


def test_kubelet_runs_then_finishes_jobs_on_the_injected_clock(busy):
    now = timezone.now()
    simulated_round(busy, now)
    job = Job.objects.get(name="tts-eval")  # declared duration 240 s
    simulated_round(busy, now + timedelta(seconds=1))
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert set(job.pods.values_list("phase", flat=True)) == {PodPhase.RUNNING}
    simulated_round(busy, now + timedelta(seconds=600))
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert set(job.pods.values_list("phase", flat=True)) == {PodPhase.SUCCEEDED}


def test_unchanged_verdicts_write_no_new_decision_rows(busy):
    # 14 x 8 GPUs fit the empty cluster (a job that never could is refused at submission) but
    # never team-nlp's quota (at most 96 GPUs).
    job = nlp_submits(busy, "too-big", priority_class="koord-free", replicas=14, cpu=1000)
    simulated_round(busy)
    simulated_round(busy)
    simulated_round(busy)
    rows = job.decisions.all()
    assert rows.count() == 1
    assert rows[0].outcome == Decision.Outcome.UNSCHEDULABLE
    assert rows[0].reason == (
        "Insufficient quotas, quotaName: team-nlp, exceedDimensions: [nvidia.com/gpu]"
    )
    assert rows[0].details["quota"] == "team-nlp"
    assert rows[0].details["exceeded_dimensions"] == ["nvidia.com/gpu"]


def test_high_priority_job_preempts_whole_lower_priority_jobs_then_runs(busy):
    now = timezone.now()
    simulated_round(busy, now)
    job = urgent_spine_gang(busy)
    for step in range(1, 5):
        simulated_round(busy, now + timedelta(seconds=step))
        job.refresh_from_db()
        if job.state != JobState.PENDING:
            break
    assert job.state in (JobState.SCHEDULED, JobState.RUNNING)
    preemption = Preemption.objects.get(preemptor=job)
    victims = [v.job for v in preemption.victims.select_related("job")]
    assert victims
    assert preemption.cost["rule"] == "LowerPriority"
    assert preemption.cost["preemptor_priority"] == 9000
    assert not preemption.reason.startswith("lower-priority")  # the engine's words only
    for row in preemption.victims.all():
        assert row.pods and row.freed.get("nvidia.com/gpu", 0) == 8 * len(row.pods)
    for victim in victims:
        assert victim.priority < job.priority
        assert victim.state == JobState.PREEMPTED
        assert not victim.pods.filter(phase__in=[PodPhase.PENDING, PodPhase.RUNNING]).exists()
    spines = {p.node.labels["network.topology.nvidia.com/spine"] for p in job.pods.all()}
    assert len(spines) == 1


class _BrokenBackend(SimulatedBackend):
    """A cluster that fails half-way through enacting a committed plan."""

    def enact(self, cluster, plan, *, now):
        super().enact(cluster, plan, now=now)
        raise ConnectionError("the cluster went away")


def test_a_round_that_fails_to_enact_keeps_its_plan_for_the_next_round(busy, monkeypatch):
    monkeypatch.setattr("koordweb.tasks.backend_for", lambda cluster: _BrokenBackend())
    bound_before = Pod.objects.filter(node__isnull=False).count()
    with pytest.raises(ConnectionError):
        run_round(busy.id)
    # The plan committed before anything was enacted; nothing of it is taken as done.
    assert Pod.objects.filter(node__isnull=False).count() == bound_before
    failed = Round.objects.get()
    assert failed.state == Round.State.FAILED
    assert "the cluster went away" in failed.error
    pending = Intent.objects.filter(state=Intent.State.PENDING, kind=Intent.Kind.BIND)
    planned = set(pending.values_list("pod_id", flat=True))
    assert planned
    # The next round enacts the leftover plan before it plans anything of its own.
    monkeypatch.setattr("koordweb.tasks.backend_for", lambda cluster: SimulatedBackend())
    summary = run_round(busy.id)
    assert not Intent.objects.filter(state=Intent.State.PENDING).exists()
    assert set(Pod.objects.filter(id__in=planned, node__isnull=False).values_list("id", flat=True))
    assert Round.objects.get(id=summary["round"]).metrics["leftover_intents"] == len(planned)


def test_a_round_that_fails_before_its_commit_leaves_the_database_as_it_was(busy, monkeypatch):
    class _BrokenSync(SimulatedBackend):
        def sync(self, cluster, *, now):
            super().sync(cluster, now=now)
            raise ConnectionError("the cluster went away")

    monkeypatch.setattr("koordweb.tasks.backend_for", lambda cluster: _BrokenSync())
    with pytest.raises(ConnectionError):
        run_round(busy.id)
    assert not Decision.objects.exists()
    assert not Intent.objects.exists()
    assert Round.objects.get().state == Round.State.FAILED


@pytest.mark.django_db(transaction=True)
def test_two_rounds_of_one_cluster_never_overlap_and_the_request_is_deferred():
    cluster = Cluster.objects.create(name="race")
    holding = threading.Event()
    release = threading.Event()
    seen: list[bool] = []

    def holder() -> None:
        with round_lock(cluster_id=cluster.id) as held:
            seen.append(held)
            holding.set()
            release.wait(10)
        connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(10)
    with round_lock(cluster_id=cluster.id) as second:
        pass
    summary = run_round(cluster.id)
    release.set()
    thread.join()
    assert seen == [True]
    assert second is False
    assert summary["skipped"] == "another round is running: deferred"
    cluster.refresh_from_db()
    assert cluster.round_pending  # the holder, had it been a round, starts the successor
    with round_lock(cluster_id=cluster.id) as free:
        assert free is True


def test_rounds_record_runtime_quota_for_the_quotas_page(busy):
    outcome = simulated_round(busy)
    runtime = outcome.round.metrics["runtime_quota"]
    assert set(runtime) >= {"root", "team-vision", "team-nlp", "team-speech"}
    teams = sum(
        runtime[t].get("nvidia.com/gpu", 0) for t in ("team-vision", "team-nlp", "team-speech")
    )
    assert 0 < teams <= runtime["root"]["nvidia.com/gpu"]


def test_the_clusters_scheduler_args_reach_the_round(busy):
    # With candidateLimit 1 a preemption plans in one domain only: the round still runs, and the
    # same configuration is what a what-if and every later round use.
    busy.scheduler_args = {"JobPreemption": {"candidateLimit": 1}, "NetworkTopology": {}}
    busy.full_clean()
    busy.save()
    summary = run_round(busy.id)
    assert Round.objects.get(id=summary["round"]).state == Round.State.SUCCEEDED
    args = {s.name: dict(s.args) for s in engine_profile(busy).plugins}
    assert args["JobPreemption"] == {"candidateLimit": 1}


def test_bad_scheduler_args_are_refused_and_a_stored_bad_one_fails_the_round_cleanly(busy):
    busy.scheduler_args = {"NetworkTopology": {"bestFit": "yes"}, "Nope": {}}
    with pytest.raises(ValidationError) as caught:
        busy.full_clean()
    messages = caught.value.message_dict["scheduler_args"]
    assert messages[0] == "NetworkTopology.bestFit: expected true or false"
    assert messages[1].startswith("Nope: unknown plugin")
    # Written past validation (a shell, an old row): the round fails before it syncs anything.
    Cluster.objects.filter(id=busy.id).update(
        scheduler_args={"JobPreemption": {"candidateLimit": 0}}
    )
    placed_before = Pod.objects.filter(cluster=busy, node__isnull=False).count()
    with pytest.raises(ValueError, match=r"JobPreemption\.candidateLimit"):
        run_round(busy.id)
    failed = Round.objects.filter(cluster=busy).latest("id")
    assert failed.state == Round.State.FAILED
    assert "JobPreemption.candidateLimit: expected at least 1" in failed.error
    assert Pod.objects.filter(cluster=busy, node__isnull=False).count() == placed_before


def test_no_automatic_collection_runs_anywhere_in_a_round(busy):
    """The whole round (sync, snapshot, record, enact), not only the plan, holds the collector
    back: with thresholds of 1 any allocation would start one, so none started from inside the
    round's body means it was paused there."""
    import gc
    import sys

    started: list[int] = []

    def count(phase: str, info: dict) -> None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "_round_execute":
            frame = frame.f_back
        if phase == "start" and frame is not None:
            started.append(info["generation"])

    was_enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(1, 1, 1)
    gc.callbacks.append(count)
    try:
        outcome = round_execute(
            cluster=busy,
            backend=SimulatedBackend(),
            trigger=Round.Trigger.MANUAL,
            now=timezone.now(),
            warm=False,  # a warm round ends with its own, explicit collection
        )
        after_round = list(started)
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*thresholds)
        if not was_enabled:
            gc.disable()
    assert outcome.summary["placed_pods"] > 0
    assert after_round == []


@pytest.mark.parametrize("backend", [SimulatedBackend, _BrokenBackend])
def test_the_round_row_names_its_worker_whether_it_finished_or_failed(busy, backend):
    now = timezone.now()
    with contextlib.suppress(ConnectionError):
        round_execute(cluster=busy, backend=backend(), trigger="timer", now=now, worker="w-7")
    (row,) = Round.objects.all()
    assert row.worker == "w-7"
    assert row.state == (Round.State.FAILED if backend is _BrokenBackend else Round.State.SUCCEEDED)
