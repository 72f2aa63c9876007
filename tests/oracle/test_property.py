"""The engine checked by the oracle over generated stories: every round of every story must keep
every rule (tests/oracle/generate.py mixes every feature); and the oracle must notice when a
profile leaves out the plugin that keeps a rule.

The stories are drawn deterministically (`derandomize`), so CI sees the same cases each run.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from scheduler import ClusterSnapshot, Profile, RoundResult, apply_round, plan_round
from scheduler.oracle import Violation, check_round
from tests.oracle.generate import Story, stories, submitted

ROUNDS = 3
CASES = 1000
PROFILE = Profile.default()


def story_rounds(story: Story, profile: Profile) -> list[tuple[ClusterSnapshot, RoundResult]]:
    """Each round's snapshot and result, the story's waves submitted before their rounds."""
    snapshot = story.snapshot
    played = []
    for number in range(ROUNDS):
        if number < len(story.waves):
            snapshot = submitted(snapshot, story.waves[number])
        result = plan_round(snapshot, profile)
        played.append((snapshot, result))
        snapshot = apply_round(snapshot, result, now=snapshot.now + 1.0)
    return played


def violations_of(story: Story, profile: Profile = PROFILE) -> list[tuple[int, Violation]]:
    return [
        (number, v)
        for number, (snapshot, result) in enumerate(story_rounds(story, profile), start=1)
        for v in check_round(snapshot, result)
    ]


@pytest.mark.no_oracle  # checks its own rounds, with every rule
@settings(
    max_examples=CASES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(stories())
def test_every_round_of_every_story_keeps_every_rule(story: Story) -> None:
    found = violations_of(story)
    assert found == [], "\n".join(f"round {n}: {v}" for n, v in found)


@pytest.mark.no_oracle  # rounds planned without TaintToleration on purpose
def test_a_profile_without_taint_toleration_is_caught() -> None:
    # Counted against the full profile on the same stories, so an engine bug that breaks the rule
    # anyway cannot make this pass.
    careless = PROFILE.without("TaintToleration")
    caught = {"careless": 0, "default": 0}

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(stories(min_nodes=2, max_nodes=6))
    def run(story: Story) -> None:
        for name, profile in (("careless", careless), ("default", PROFILE)):
            found = violations_of(story, profile)
            caught[name] += sum(1 for _, v in found if v.rule == "TaintToleration")

    run()
    assert caught["careless"] > caught["default"], caught
