"""Paths of the job cycle that skip work: pod names sorted by their digit runs, node scores
counted only when a placement reads them, and no pod-by-pod re-check for pods of one template."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from scheduler import plan_round
from scheduler.cycle import Framework
from scheduler.framework import NodeMask, Plan
from scheduler.plugins.devices import DeviceShare
from scheduler.profile import PluginSpec, Profile
from scheduler.state import CycleState
from scheduler.vocabulary import natural_key
from tests.scheduler.builders import CORE, cluster, gang, node


@pytest.mark.parametrize(
    "name",
    ["pod-2", "pod-10", "gang-00012-3", "a²-5", "a-b", "x", "abc-12x", "n-٣", "a-²", "-7", "p-"],
)
def test_the_short_way_for_prefix_dash_number_keys_as_the_digit_runs_do(name: str) -> None:
    parts = re.split(r"(\d+)", name)
    assert natural_key(name) == tuple(int(p) if p.isdigit() else p for p in parts)


def test_names_sort_by_their_numbers() -> None:
    names = ["pod-10", "pod-2", "gang-2-10", "gang-10-1", "gang-2-9"]
    assert sorted(names, key=natural_key) == [
        "gang-2-9",
        "gang-2-10",
        "gang-10-1",
        "pod-2",
        "pod-10",
    ]


def test_scores_are_counted_only_when_a_placement_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snap = (
        cluster()
        .node(node("a").cpu(16), node("b").cpu(16))
        .submit(gang("ml/fits", pods=2).cpu(8), gang("ml/too-big", pods=3).cpu(16))
        .snapshot()
    )
    framework = Framework(Profile.default())
    device_share = framework.plugin("DeviceShare")
    assert isinstance(device_share, DeviceShare)
    asked: list[int] = []
    score_nodes = device_share.score_nodes

    def counting(*args: Any) -> Any:
        asked.append(1)
        return score_nodes(*args)

    monkeypatch.setattr(device_share, "score_nodes", counting)
    state = CycleState(snap)
    framework.start(state)
    too_big = state.jobs["ml/too-big"]
    failed = framework.try_place(state, too_big, state.pending_pods(too_big))
    assert not isinstance(failed, Plan)
    assert len(asked) == 0  # a failed placement never reads scores
    fits = state.jobs["ml/fits"]
    scores = framework.node_scores(state, fits)
    assert len(asked) == 0
    placed = framework.try_place(state, fits, state.pending_pods(fits), scores=scores)
    assert isinstance(placed, Plan)
    assert len(asked) == 1
    framework.try_place(state, fits, state.pending_pods(fits), scores=scores)
    assert len(asked) == 1  # counted once for every placement given them


def test_pods_of_one_template_are_rechecked_only_when_the_job_mixes_templates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `_fits` says yes to pods of one template wherever they go (their count is exact): the
    # cycle asks it only for a job of several templates.
    snap = (
        cluster()
        .node(node("a").cpu(16), node("b").cpu(16))
        .submit(gang("ml/one", pods=3).cpu(4), gang("ml/mixed", pods=2).cpu(4))
        .snapshot()
    )
    bigger = replace(snap.pods[-2], requests={"cpu": 6_000})  # ml/mixed-1
    snap = replace(snap, pods=(*snap.pods[:-2], bigger, snap.pods[-1]))
    framework = Framework(Profile.default())
    state = CycleState(snap)
    framework.start(state)
    one = state.pending_pods(state.jobs["ml/one"])
    for nodes in ([0, 0, 0], [1, 0, 1], [1, 1, 1]):
        assert framework._fits(state, {p.key: n for p, n in zip(one, nodes, strict=True)})
    asked: list[str] = []
    fits = framework._fits

    def recording(state: CycleState, assignment: dict[str, int]) -> bool:
        asked.append(next(iter(assignment)))
        return fits(state, assignment)

    monkeypatch.setattr(framework, "_fits", recording)
    for name in ("ml/one", "ml/mixed"):
        job = state.jobs[name]
        assert isinstance(framework.try_place(state, job, state.pending_pods(job)), Plan)
    assert asked == ["ml/mixed-1"]


class SameTeam:
    """A Filter outside the tree: a pod goes only to nodes of its `team` label."""

    name = "SameTeam"
    extension_points = frozenset({"Filter"})

    def __init__(self, args: Any, handle: Any) -> None:
        self.args = args

    def node_mask(self, state: CycleState, pod: Any) -> NodeMask | None:
        team = pod.labels.get("team")
        allowed = np.array([n.labels.get("team") == team for n in state.nodes], dtype=np.bool_)
        return NodeMask(allowed, "node(s) of another team")


class SameTeamDeclared(SameTeam):
    name = "SameTeamDeclared"
    pod_fields = ("labels:team",)


class SameTeamMisdeclared(SameTeam):
    name = "SameTeamMisdeclared"
    pod_fields = ("requests",)  # a planted bug: it reads labels


@pytest.mark.no_oracle  # the oracle does not know this out-of-tree Filter's rule
@pytest.mark.parametrize(
    ("plugin", "kept"),
    [("SameTeam", True), ("SameTeamDeclared", True), ("SameTeamMisdeclared", False)],
)
def test_the_template_key_covers_what_the_profiles_filters_read(plugin: str, kept: bool) -> None:
    # Two gang members alike but for their team label, two nodes of those teams: grouped by a
    # key that leaves the label out, both members take the first one's verdict. A Filter that
    # declares no `pod_fields` is taken to read every spec field.
    snap = (
        cluster()
        .node(node("a").cpu(8).label("team", "blue"), node("b").cpu(8).label("team", "red"))
        .submit(gang("ml/g", pods=2).cpu(8))
        .snapshot()
    )
    teams = zip(snap.pods, ("red", "blue"), strict=True)
    red, blue = (replace(p, labels={**p.labels, "team": t}) for p, t in teams)
    snap = replace(snap, pods=(red, blue))
    registry = {plugin: f"{__name__}:{plugin}"}
    profile = Profile("default", (*CORE.plugins, PluginSpec(plugin)), tuple(registry.items()))
    placed = {k: p.node for k, p in plan_round(snap, profile).placements.items()}
    right = {red.key: "b", blue.key: "a"}
    assert (placed == right) is kept, placed
