"""A round's preemption records the engine's rule as data (`cost["rule"]`, and the preemptor's
priority), for each of the three rules, and no page says the rule by its engine name."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from koordweb.engine import pipeline as records
from koordweb.models import Job, Preemption
from scheduler.result import RoundResult
from tests.builders import Teams, gang, simulated_round, teams, whole_cards
from tests.koordweb.ui.test_walk import readable_text

pytestmark = pytest.mark.django_db

EIGHT = {"cpu": 8000, "nvidia.com/gpu": 8}
# The engine's rule names; a job's preemption policy (PreemptLowerPriority) is Kubernetes' own.
RULE_NAMES = re.compile(r"\b(LowerPriority|InQuota|QuotaReclaim)\b")


def _running(world: Teams, name: str, quota: Any, priority_class: Any, on: list[Any]) -> Job:
    return gang(
        world.cluster,
        name,
        quota=quota,
        priority_class=priority_class,
        replicas=len(on),
        requests=EIGHT,
        nodes=on,
        annotations=whole_cards(8),
    )


def _pending(world: Teams, name: str, quota: Any, priority_class: Any, replicas: int) -> Job:
    return gang(
        world.cluster,
        name,
        quota=quota,
        priority_class=priority_class,
        replicas=replicas,
        requests=EIGHT,
    )


def lower_priority() -> tuple[Teams, Job]:
    """bob's batch jobs fill the four nodes; alice's prod job, well inside her quota, needs one."""
    world = teams(gpu_quota={"root": (32, 32), "team-a": (16, 32), "team-b": (16, 32)})
    for i, node in enumerate(world.nodes):
        _running(world, f"batch-b{i}", world.team_b, world.batch, [node])
    return world, _pending(world, "urgent-a", world.team_a, world.prod, 1)


def in_quota() -> tuple[Teams, Job]:
    """alice's batch jobs use all of team-a's 16 GPUs (its max); her prod job needs 8 more of
    it: nodes are free, the quota is not."""
    world = teams(gpu_quota={"root": (32, 32), "team-a": (16, 16), "team-b": (16, 16)})
    for i, node in enumerate(world.nodes[:2]):
        _running(world, f"batch-a{i}", world.team_a, world.batch, [node])
    return world, _pending(world, "urgent-a", world.team_a, world.prod, 1)


def quota_reclaim() -> tuple[Teams, Job]:
    """team-b (min 0) borrows the whole cluster at prod priority; alice asks for 16 GPUs of
    team-a's guaranteed 16 at batch priority: only reclaiming the borrowed quota frees them."""
    world = teams(gpu_quota={"root": (32, 32), "team-a": (16, 32), "team-b": (0, 32)})
    for i, node in enumerate(world.nodes):
        _running(world, f"prod-b{i}", world.team_b, world.prod, [node])
    return world, _pending(world, "train-a", world.team_a, world.batch, 2)


@pytest.fixture
def engine_results(monkeypatch: pytest.MonkeyPatch) -> list[RoundResult]:
    """Every RoundResult the engine returns to the round, as it returned it."""
    seen: list[RoundResult] = []
    plan: Callable[..., RoundResult] = records.plan_round

    def spied(*args: Any, **kwargs: Any) -> RoundResult:
        seen.append(plan(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(records, "plan_round", spied)
    return seen


@pytest.mark.parametrize(
    ("scenario", "rule"),
    [(lower_priority, "LowerPriority"), (in_quota, "InQuota"), (quota_reclaim, "QuotaReclaim")],
)
def test_a_rounds_preemption_records_the_engines_rule(
    scenario: Callable[[], tuple[Teams, Job]], rule: str, engine_results: list[RoundResult]
) -> None:
    world, preemptor = scenario()
    simulated_round(world.cluster)
    [record] = [p for result in engine_results for p in result.preemptions]
    assert record.rule == rule  # the scenario is the rule's
    row = Preemption.objects.get(preemptor=preemptor)
    assert row.cost["rule"] == record.rule
    assert row.cost["preemptor_priority"] == preemptor.priority
    assert row.cost["highest_victim_priority"] == record.cost["highest_victim_priority"]
    assert row.reason == record.reason  # the engine's words, nothing in front


def _pages(world: Teams, row: Preemption) -> list[str]:
    victims = [v.job_id for v in row.victims.all()]
    return [
        reverse("preemptions"),
        reverse("preemption-detail", args=[row.pk]),
        reverse("round-detail", args=[row.round_id]),
        reverse("job-detail", args=[row.preemptor_id]),
        *(reverse("job-detail", args=[pk]) for pk in victims),
    ]


@pytest.mark.parametrize(
    ("scenario", "words"),
    [
        (lower_priority, "Evicted lower-priority jobs: the preemptor has priority 9000"),
        (in_quota, "Evicted lower-priority jobs of its own quota"),
        (quota_reclaim, "Took back quota that other quotas had borrowed"),
    ],
)
def test_pages_say_the_rule_in_words_never_by_its_engine_name(
    scenario: Callable[[], tuple[Teams, Job]], words: str
) -> None:
    world, preemptor = scenario()
    simulated_round(world.cluster)
    row = Preemption.objects.get(preemptor=preemptor)
    for user in (world.admin, world.alice, world.bob):
        client = Client()
        client.force_login(user)
        for url in _pages(world, row):
            response = client.get(url)
            if response.status_code == 404:  # another team's job page
                continue
            text = readable_text(response.content.decode())
            assert RULE_NAMES.search(text) is None, (user.username, url)
        if user != world.bob:  # the admin, and alice whose job preempted (bob may see none)
            ledger = readable_text(client.get(reverse("preemptions")).content.decode())
            assert words in ledger, user.username
