"""Which pod phases count as finished has one definition
(`scheduler.vocabulary.FINISHED_POD_PHASES`), and the engine, the rows and the round's snapshot
agree on it: a finished pod holds nothing, is not in the engine's input, and is not evicted again.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from koordweb.backends.base import EnactPlan, Eviction
from koordweb.backends.intents import intents_write
from koordweb.backends.simulated import SimulatedBackend
from koordweb.engine.assembly import build_for_round
from koordweb.engine.outbox import intents_enact
from koordweb.models import Intent, JobState, Pod, PodPhase
from koordweb.rows.pods import job_refresh_states
from scheduler.model import PodInfo
from scheduler.vocabulary import FINISHED_POD_PHASES, POD_PHASES
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory, QuotaFactory

FINISHED = {"Succeeded", "Failed"}


def test_succeeded_and_failed_are_the_finished_phases() -> None:
    assert set(FINISHED_POD_PHASES) == FINISHED
    assert set(FINISHED_POD_PHASES) < set(POD_PHASES)
    assert [phase.value for phase in PodPhase] == list(POD_PHASES)


@pytest.mark.parametrize("phase", POD_PHASES)
def test_the_engine_counts_a_bound_pod_on_its_node_until_it_finishes(phase: str) -> None:
    pod = PodInfo("ml", "p-0", "ml/job", node="n1", phase=phase)  # type: ignore[arg-type]
    assert pod.consumes_node is (phase not in FINISHED)


@pytest.mark.django_db
def test_the_round_reads_no_finished_pod_and_evicts_none() -> None:
    cluster = ClusterFactory(name="phases")
    node = NodeFactory(cluster=cluster, name="n1")
    quota = QuotaFactory(cluster=cluster, name="team-a")
    job = JobFactory(
        cluster=cluster, name="job", quota=quota, state=JobState.RUNNING, total_number=4
    )
    for phase in POD_PHASES:
        PodFactory(job=job, name=f"p-{phase.lower()}", node=node, phase=phase, uid=phase)

    snapshot, _ = build_for_round(cluster, now=timezone.now())
    assert sorted(p.phase for p in snapshot.pods) == ["Pending", "Running"]
    assert all(p.consumes_node for p in snapshot.pods)

    # Each pod is evicted: the outbox evicts the unfinished ones and settles the others at once.
    pods = list(Pod.objects.filter(job=job))
    plan = EnactPlan(
        evictions=tuple(Eviction(p.id, p.namespace, p.name, "ml/urgent") for p in pods)
    )
    intents_write(cluster=cluster, round_id=None, plan=plan, now=timezone.now())
    summary = intents_enact(cluster=cluster, backend=SimulatedBackend(), now=timezone.now())
    terminating = dict(Pod.objects.filter(job=job).values_list("phase", "terminating"))
    assert terminating == {"Pending": True, "Running": True, "Succeeded": False, "Failed": False}
    assert not Intent.objects.filter(cluster=cluster, state=Intent.State.PENDING).exists()
    assert summary.intents == len(POD_PHASES)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("phases", "state"),
    [
        (["Succeeded", "Succeeded"], JobState.SUCCEEDED),
        (["Failed", "Running"], JobState.FAILED),
        (["Running", "Running"], JobState.RUNNING),
    ],
)
def test_a_job_whose_pods_finished_is_final(phases: list[str], state: str) -> None:
    cluster = ClusterFactory(name="phases")
    node = NodeFactory(cluster=cluster, name="n1")
    job = JobFactory(cluster=cluster, name="job", state=JobState.RUNNING)
    for index, phase in enumerate(phases):
        PodFactory(job=job, name=f"p-{index}", node=node, phase=phase)
    job_refresh_states(jobs=[job], now=timezone.now())
    job.refresh_from_db()
    assert job.state == state
    over = all(p in FINISHED for p in phases) or "Failed" in phases
    assert (job.state in JobState.FINAL) is over
