"""A preemption search costs its plans in any order and stops a plan once it is sure to lose:
the plan chosen is the one costing every plan in full would choose."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from benchmarks.round_scale import build_snapshot
from scheduler import Profile, plan_round
from scheduler.plugins import preemption, preemption_plans
from scheduler.victims import VictimJob


def test_stopping_losing_plans_early_chooses_what_costing_all_of_them_chooses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot = build_snapshot(300, 1_200, 120)
    stopped: list[bool] = []
    loses = preemption_plans.loses

    def counted(victims: Sequence[VictimJob], beat: tuple[Any, ...]) -> bool:
        stopped.append(loses(victims, beat))
        return stopped[-1]

    # The plugin asks `loses` of a remembered plan; `reprieve` asks it of a plan as it is costed.
    for module in (preemption, preemption_plans):
        monkeypatch.setattr(module, "loses", counted)
    early = plan_round(snapshot, Profile.default())
    assert any(stopped)  # plans were stopped early
    assert len(early.preemptions) > 10
    for module in (preemption, preemption_plans):
        monkeypatch.setattr(module, "loses", lambda victims, beat: False)
    full = plan_round(snapshot, Profile.default())
    assert early.preemptions == full.preemptions
    assert early.unschedulable == full.unschedulable
    assert early.placements == full.placements
