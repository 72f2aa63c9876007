"""Plugin contracts hold: a plugin is built only when its methods match the extension points it
declares, in-tree or out-of-tree, and an out-of-tree plugin registered by the caller's mapping
(koordweb's setting) is configured and checked like an in-tree one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from scheduler import plan_round
from scheduler.contracts import conformance_problems
from scheduler.cycle import Framework
from scheduler.framework import FloatArray, Handle, IntArray, Status
from scheduler.model import JobInfo, PodInfo
from scheduler.profile import (
    REGISTRY,
    PluginSpec,
    Profile,
    ProfileError,
    check_args,
    plugin_class,
)
from scheduler.state import CycleState
from tests.plugin_example import EXAMPLE_DIR
from tests.scheduler.builders import gang, pod, t8

HERE = "tests.scheduler.test_plugin_contracts"


class MisspeltScore:
    """Declares Score, but its method is `score_node`: it would never be called."""

    name = "MisspeltScore"
    extension_points = frozenset({"Score"})

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        pass

    def score_node(self, state: CycleState, job: JobInfo, node_indices: IntArray) -> FloatArray:
        return np.ones(len(node_indices))


class UndeclaredPreFilter:
    """Has `pre_filter` but declares only Score (with its method)."""

    name = "UndeclaredPreFilter"
    extension_points = frozenset({"Score"})

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        pass

    def score_nodes(self, state: CycleState, job: JobInfo, node_indices: IntArray) -> FloatArray:
        return np.zeros(len(node_indices))

    def pre_filter(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> Status:
        return Status.success()


class SquashedPreFilter:
    """Declares PreFilter, spelt `prefilter`."""

    name = "SquashedPreFilter"
    extension_points = frozenset({"PreFilter"})

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        pass

    def prefilter(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> Status:
        return Status.success()


class HalfReserve:
    """Declares Reserve without `unreserve`, and a PreFilter that takes too few arguments."""

    name = "HalfReserve"
    extension_points = frozenset({"Reserve", "PreFilter"})

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        pass

    def reserve(self, state: CycleState, job: JobInfo, plan: Any) -> Any:
        return None

    def pre_filter(self, state: CycleState, job: JobInfo) -> Status:
        return Status.success()


def test_a_misspelt_extension_method_is_refused_at_profile_build() -> None:
    registry = {"MisspeltScore": f"{HERE}:MisspeltScore"}
    config = {"enabledPlugins": ["MisspeltScore"]}
    problems = check_args(config, registry)
    assert list(problems) == ["enabledPlugins[0]"]
    assert (
        "MisspeltScore.score_node looks like a misspelt score_nodes"
        in problems["enabledPlugins[0]"]
    )
    assert (
        "MisspeltScore declares Score but has no score_nodes method"
        in problems["enabledPlugins[0]"]
    )
    with pytest.raises(ProfileError):
        Profile.configured(config, registry)
    # built in code, without the configuration check, the builder refuses it the same way
    extra = PluginSpec("MisspeltScore")
    profile = Profile("default", (*Profile.default().plugins, extra), tuple(registry.items()))
    with pytest.raises(ProfileError) as caught:
        Framework(profile)
    assert "MisspeltScore.score_node looks like a misspelt score_nodes" in str(caught.value)


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (
            UndeclaredPreFilter,
            "UndeclaredPreFilter.pre_filter implements extension point PreFilter, which "
            "UndeclaredPreFilter does not declare",
        ),
        (HalfReserve, "HalfReserve declares Reserve but has no unreserve method"),
        (SquashedPreFilter, "SquashedPreFilter.prefilter looks like a misspelt pre_filter"),
        (HalfReserve, "HalfReserve.pre_filter takes 2 positional argument(s) besides self"),
    ],
)
def test_a_plugin_that_breaks_its_declared_contracts_is_named(cls: type, expected: str) -> None:
    assert any(p.startswith(expected) for p in conformance_problems(cls)), conformance_problems(cls)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_in_tree_plugin_implements_what_it_declares(name: str) -> None:
    assert conformance_problems(plugin_class(name)) == []


def test_unknown_names_and_bad_registrations_are_refused_by_name() -> None:
    assert check_args({"enabledPlugins": ["Nope"]})["enabledPlugins[0]"].startswith(
        "unknown plugin 'Nope'"
    )
    assert (
        "already in the profile"
        in check_args({"enabledPlugins": ["NetworkTopology"]})["enabledPlugins[0]"]
    )
    twice = check_args({}, {"NetworkTopology": "somewhere:Else"})
    assert list(twice) == ["registry.NetworkTopology"]
    assert "registered twice" in twice["registry.NetworkTopology"]
    assert 'not "module:Class"' in check_args({}, {"X": "nocolon"})["registry.X"]


def test_an_out_of_tree_filter_from_the_setting_changes_the_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    registry = {"MaxPodsPerBlock": "prefer_label_plugin.max_pods_per_block:MaxPodsPerBlock"}
    # T8: blocks of two 16-CPU nodes; node-1 (block b1) holds one pod already.
    snap = (
        t8(pod("x").cpu(4).on("node-1"))
        .submit(gang("ml/a", pods=6).cpu(4), gang("ml/b", pods=2).cpu(4))
        .snapshot()
    )
    core = Profile.default().without("DeviceShare", "LoadAware")
    config = {"enabledPlugins": ["MaxPodsPerBlock"], "MaxPodsPerBlock": {"maxPods": 3}}
    assert check_args(config, registry) == {}
    limited = Profile.configured(config, registry).without("DeviceShare", "LoadAware")
    before, after = plan_round(snap, core), plan_round(snap, limited)
    blocks = {n.name: n.labels["network.topology.nvidia.com/block"] for n in snap.nodes}

    def per_block(placements: Mapping[str, Any]) -> dict[str, int]:
        count: dict[str, int] = {"b1": 1}  # the bound pod
        for placement in placements.values():
            block = blocks[placement.node]
            count[block] = count.get(block, 0) + 1
        return count

    assert max(per_block(before.placements).values()) > 3  # the default packs a block fuller
    assert len(after.placements) == 8
    assert max(per_block(after.placements).values()) == 3
    with pytest.raises(ProfileError) as caught:
        Profile.configured({**config, "MaxPodsPerBlock": {"maxPods": -1}}, registry)
    assert "MaxPodsPerBlock.maxPods: expected at least 0" in str(caught.value)
