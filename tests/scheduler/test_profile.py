"""Profiles configured from plain JSON: every plugin argument is checked against what the plugin
declares, and a valid configuration reaches the plugins it names."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler import plan_round
from scheduler.cycle import Framework
from scheduler.plugins.preemption import JobPreemption
from scheduler.plugins.topology import NetworkTopology
from scheduler.profile import Profile, ProfileError, check_args
from tests.scheduler.builders import gang, pod, t8


@pytest.mark.parametrize(
    ("config", "where", "message"),
    [
        ([], "", "expected an object of plugin name -> arguments"),
        ({"Bogus": {}}, "Bogus", "unknown plugin"),
        ({"NetworkTopology": True}, "NetworkTopology", "expected an object of argument name"),
        ({"NetworkTopology": {"bestfit": True}}, "NetworkTopology.bestfit", "takes: bestFit"),
        ({"NetworkTopology": {"bestFit": "yes"}}, "NetworkTopology.bestFit", "true or false"),
        ({"JobPreemption": {"candidateLimit": 0}}, "JobPreemption.candidateLimit", "at least 1"),
        ({"JobPreemption": {"candidateLimit": True}}, "JobPreemption.candidateLimit", "integer"),
        ({"JobPreemption": {"candidateLimit": 2.5}}, "JobPreemption.candidateLimit", "integer"),
        ({"DeviceShare": {"scoring": "Spread"}}, "DeviceShare.scoring", "MostAllocated"),
        ({"LoadAware": {"usageThresholds": {"cpu": 120}}}, "LoadAware.usageThresholds", "cpu:"),
        ({"LoadAware": {"resourceWeights": [1]}}, "LoadAware.resourceWeights", "resource name"),
        ({"PrioritySort": {"order": "fifo"}}, "PrioritySort.order", "takes: largestFirst"),
        ({"Coscheduling": {"mode": "Strict"}}, "Coscheduling.mode", "takes: enablePreemption"),
    ],
)
def test_bad_arguments_are_named_with_what_is_wrong(config: Any, where: str, message: str) -> None:
    problems = check_args(config)
    assert list(problems) == [where]
    assert message in problems[where]
    with pytest.raises(ProfileError) as caught:
        Profile.configured(config)
    assert caught.value.problems == problems


def test_every_problem_is_reported_at_once() -> None:
    config = {"NetworkTopology": {"bestFit": 1, "podCountMultiple": None}, "Nope": {}}
    assert sorted(check_args(config)) == [
        "NetworkTopology.bestFit",
        "NetworkTopology.podCountMultiple",
        "Nope",
    ]


def test_valid_arguments_reach_the_plugins() -> None:
    config = {
        "NetworkTopology": {"bestFit": True, "parentFragmentation": True},
        "JobPreemption": {"candidateLimit": 3},
        "LoadAware": {"usageThresholds": {"cpu": 70}},
        "DeviceShare": {"scoring": "MostAllocated"},
    }
    assert check_args(config) == {}
    plugins = {type(p).__name__: p for p in Framework(Profile.configured(config)).plugins}
    topology = plugins["NetworkTopology"]
    assert isinstance(topology, NetworkTopology)
    assert topology.options.best_fit and topology.options.parent_fragmentation
    preemption = plugins["JobPreemption"]
    assert isinstance(preemption, JobPreemption) and preemption.candidate_limit == 3
    assert Profile.configured({}) == Profile.default()


def test_a_configured_profile_changes_the_round() -> None:
    busy = [pod("used").cpu(8).on("node-1")]
    snap = t8(*busy).submit(gang("ml/g", pods=5).cpu(4).must_gather("BlockLayer")).snapshot()
    default = plan_round(snap, Profile.configured({}))
    spread = plan_round(snap, Profile.configured({"NetworkTopology": {"bestFit": False}}))
    assert default.placements["ml/g-1"].node == "node-1"
    assert spread.placements["ml/g-1"].node == "node-8"


def test_a_profile_built_in_code_is_checked_the_same_way() -> None:
    with pytest.raises(ProfileError) as caught:
        Framework(Profile.default().with_args("DeviceShare", scoring="Spread"))
    assert "DeviceShare.scoring: expected one of LeastAllocated, MostAllocated" in str(caught.value)
