"""Data for the browser tests: the lead's demo cluster (seed_demo) plus an audit trail of
rounds, decisions and a preemption, and the last minutes of koordlet's node reports with the
card samples taken from them, so every page has something to draw (node usage, utilisation)."""

from __future__ import annotations

import io
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from koordweb.backends.simulated_usage import node_metrics_report
from koordweb.models import (
    Cluster,
    Decision,
    Job,
    JobState,
    Pod,
    Preemption,
    Round,
)
from koordweb.models.gpu_usage import epoch
from koordweb.services.gpu_usage import gpu_samples_ingest
from tests.builders import DecisionFactory, PreemptionFactory, RoundFactory, VictimFactory

PASSWORD = "browser-test-password-9"


def seed() -> Cluster:
    """Seed the demo (the caller points settings.VAR_DIR at a temporary directory, where the
    seed writes its credentials file), give two users a known password, add the history."""
    call_command("seed_demo", stdout=io.StringIO())
    cluster = Cluster.objects.get(name=settings.KOORDWEB_CLUSTER)
    for name in ("admin", "alice"):
        user = get_user_model().objects.get(username=name)
        user.set_password(PASSWORD)
        user.save()
    _history(cluster)
    _usage(cluster)
    return cluster


# Minutes of node reports (one a minute) before now: enough for complete sample periods.
REPORTED_MINUTES = 5


def _usage(cluster: Cluster) -> None:
    """koordlet's reports of the last minutes, as the simulated backend writes them each round,
    and the card samples the beat task takes from them: jobs that started minutes ago have
    complete periods, so their usage, the heatmap's utilisation and the overview's node use
    are drawn."""
    now = timezone.now()
    step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
    # The seed's history reaches the current period; its last minutes are sampled again from
    # the reports (the notebook's card counted twice for those minutes: a few GPU-minutes).
    end = epoch(now) // step * step
    cluster.gpu_sampled_until = end - REPORTED_MINUTES * step
    cluster.save(update_fields=["gpu_sampled_until"])
    for minutes in range(REPORTED_MINUTES, -1, -1):
        moment = now - timedelta(seconds=minutes * step)
        node_metrics_report(cluster, now=moment)
        gpu_samples_ingest(cluster=cluster, now=moment)


def _history(cluster: Cluster) -> None:
    now = timezone.now()
    rounds = [
        RoundFactory(
            cluster=cluster,
            number=i + 1,  # numbered per cluster, as engine.pipeline numbers them
            state=Round.State.FAILED if i == 7 else Round.State.SUCCEEDED,
            trigger=Round.Trigger.SUBMIT if i % 3 == 0 else Round.Trigger.TIMER,
            started_at=now - timedelta(minutes=10 * (12 - i)),
            duration_ms=30 + 7 * i,
            engine_ms=20 + 5 * i,
            jobs_considered=5 + i,
            jobs_placed=i % 4,
            preemption_count=1 if i == 9 else 0,
            error="backend sync timed out" if i == 7 else "",
        )
        for i in range(12)
    ]
    pending = Job.objects.filter(cluster=cluster, state=JobState.PENDING)
    for job in pending[:20]:
        DecisionFactory(
            round=rounds[-1],
            job=job,
            outcome=Decision.Outcome.UNSCHEDULABLE,
            reason="no candidate topology nodes can accommodate job, desiredOfferSlot: 4, "
            "topology topologyNode BlockLayer/b1: 2; BlockLayer/b2: 3",
            details={
                "plugin": "NetworkTopology",
                "desired_offer_slots": 4,
                "domain_offer_slots": {"BlockLayer/b1": 2, "BlockLayer/b2": 3},
                "counterfactual": {"quota_increase": {"team-nlp": {"nvidia.com/gpu": 8}}},
                # as the engine gives it: the case's code and the numbers behind it
                "cause": {
                    "code": "TopologyNoDomain",
                    "plugin": "NetworkTopology",
                    "values": {
                        "job_pods": job.total_number,
                        "pods": job.total_number,
                        "layer": "BlockLayer",
                        "best_domain": "BlockLayer/b2",
                        "best_offer_slots": 3,
                    },
                    "node_reasons": [],
                },
            },
            created_at=rounds[-1].started_at,
        )
    running = list(
        Job.objects.filter(cluster=cluster, state=JobState.RUNNING).order_by("-priority", "name")
    )
    if len(running) >= 2:
        preemptor, victim = running[0], running[-1]
        started = rounds[10].started_at
        # the preemptor preempted in round 9 and started on the nodes nominated for it (its
        # pods' nodes) in round 10; it was submitted before either
        preemptor.submitted_at = rounds[8].started_at
        preemptor.started_at = started
        preemptor.save(update_fields=["submitted_at", "started_at"])
        pods = Pod.objects.filter(job=preemptor, node__isnull=False).select_related("node")
        pods.update(started_at=started, bound_at=started)
        nominations = {pod.name: pod.node.name for pod in pods}
        DecisionFactory(
            round=rounds[9],
            job=preemptor,
            outcome=Decision.Outcome.PREEMPTING,
            reason="preempting",
            created_at=rounds[9].started_at,
        )
        DecisionFactory(
            round=rounds[10],
            job=preemptor,
            outcome=Decision.Outcome.PLACED,
            reason="",
            details={"nominated": True},
            created_at=rounds[10].started_at,
        )
        victim.state = JobState.PREEMPTED
        victim.started_at = now - timedelta(hours=3)  # so the timeline shows its lost run
        victim.save(update_fields=["state", "started_at"])
        preemption = PreemptionFactory(
            cluster=cluster,
            round=rounds[9],
            preemptor=preemptor,
            state=Preemption.State.ENACTED,
            reason=f"{preemptor} needs its block; {victim} has the lowest priority there",
            cost={"max_victim_priority": victim.priority, "jobs": 1},
            created_at=rounds[9].started_at,
            nominations=nominations,
            # the preemptor runs: its preemption's outcome says so
            outcome=Preemption.Outcome.STARTED,
            outcome_reason="All its pods started on their nominated nodes.",
            outcome_at=started,
        )
        VictimFactory(
            preemption=preemption,
            job=victim,
            pods=[f"{victim.namespace}/{victim.name}-0"],
            freed={"nvidia.com/gpu": 8},
        )
