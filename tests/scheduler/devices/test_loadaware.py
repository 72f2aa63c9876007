"""The LoadAware plugin: thresholds, estimates of freshly placed pods, expiry, score."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from scheduler.causes import LOAD_OVER_THRESHOLD, METRIC_EXPIRED
from scheduler.cycle import Framework
from scheduler.framework import Plan, Refusal
from scheduler.model import NodeInfo
from scheduler.plugins.loadaware import LoadAware
from scheduler.profile import Profile
from scheduler.round import plan_round
from scheduler.state import CycleState
from scheduler.vocabulary import ANNOTATION_USAGE_THRESHOLDS
from tests.scheduler.builders import GI, cluster, gang, node


def loaded(name: str, cpu_used: float, memory_used_gib: int = 0, **extra: object) -> NodeInfo:
    info = node(name).cpu(10).memory(100).build()
    usage = {"cpu": int(cpu_used * 1000), "memory": memory_used_gib * GI}
    return replace(info, usage=usage, **extra)  # type: ignore[arg-type]


def load_aware(args: dict[str, Any]) -> LoadAware:
    """The plugin as a profile builds it, with `args`."""
    plugin = Framework(Profile.default().with_args("LoadAware", **args)).plugin("LoadAware")
    assert isinstance(plugin, LoadAware)
    return plugin


def state_with(
    *nodes: NodeInfo, pods: int = 1, cpu: float = 1.0, now: float = 0.0
) -> tuple[CycleState, LoadAware]:
    c = cluster()
    c.nodes.extend(nodes)
    c.submit(gang("default/web", pods=pods).cpu(cpu))
    state = CycleState(replace(c.snapshot(), now=now))
    plugin = load_aware({})
    plugin.setup(state)
    return state, plugin


def slots(state: CycleState, plugin: LoadAware) -> list[int]:
    job = state.jobs["default/web"]
    result = plugin.slot_limits(state, job, state.pending_pods(job), np.arange(len(state.nodes)))
    assert result is not None
    return result.tolist()


def test_cpu_threshold_counts_the_jobs_own_pods() -> None:
    # 10 cores at 65%: 6.5 cores. 4.0 reported leaves room for pods of 0.85 estimated cores:
    # 4.85, 5.70, 6.55 (rounds to 66% > 65%) -> two pods.
    state, plugin = state_with(loaded("n1", 4.0), pods=5)
    assert slots(state, plugin) == [2]


def test_over_threshold_node_takes_nothing_and_explains_why() -> None:
    state, plugin = state_with(loaded("hot", 6.6), loaded("cool", 1.0), pods=1)
    assert slots(state, plugin) == [1, 0]  # nodes in name order: cool, hot
    job = state.jobs["default/web"]
    hot = np.array([state.node_index["hot"]])
    assert plugin.explain(state, job, state.pending_pods(job), hot) == {
        Refusal(LOAD_OVER_THRESHOLD, "node(s) cpu usage exceed threshold", "cpu"): 1
    }


def test_memory_threshold_and_node_annotation_override() -> None:
    custom = {ANNOTATION_USAGE_THRESHOLDS: json.dumps({"usageThresholds": {"cpu": 90}})}
    base = loaded("n1", 7.0, memory_used_gib=10)
    state, plugin = state_with(base, replace(base, name="n2", annotations=custom), pods=3)
    # n1: 7.0 cores is over 65% already; n2 allows 90%: 7.85, 8.70, 9.55 (96%) -> two pods.
    assert slots(state, plugin) == [0, 2]
    # Memory: a pod requesting none is estimated at 200Mi x 70%; 95 GiB + that rounds to 95%.
    state, plugin = state_with(loaded("m95", 1.0, 95), loaded("m96", 1.0, 96), pods=1)
    assert slots(state, plugin) == [1, 0]


def test_a_nodes_own_thresholds_replace_the_plugins_whole() -> None:
    """Koordinator's generateUsageThresholdsFilterProfile: the annotation's usageThresholds are
    the node's vector; memory, left out of it, is not checked there (the plugin's 95% is not
    merged in)."""
    cpu_only = {ANNOTATION_USAGE_THRESHOLDS: json.dumps({"usageThresholds": {"cpu": 90}})}
    full = loaded("full", 1.0, memory_used_gib=99)
    state, plugin = state_with(full, replace(full, name="own", annotations=cpu_only), pods=1)
    assert slots(state, plugin) == [0, 1]  # name order: full (memory 99% > 95%), own


@dataclass(frozen=True)
class ReportedNode(NodeInfo):
    """A node with its NodeMetric report time (seconds on the snapshot clock)."""

    usage_reported_at: float | None = None


def reported(name: str, cpu_used: float, at: float) -> NodeInfo:
    base = loaded(name, cpu_used)
    fields = {
        f: getattr(base, f) for f in ("name", "allocatable", "labels", "annotations", "usage")
    }
    return ReportedNode(**fields, usage_reported_at=at)


def test_nodes_without_reports_skip_the_filter_and_expired_ones_are_refused() -> None:
    # Koordinator v1.7 TestFilterExpiredNodeMetric / TestEnableScheduleWhenNodeMetricsExpired.
    nodes = [
        reported("fresh", 9.0, at=900.0),
        reported("stale", 1.0, at=800.0),  # 200 s old: past the 180 s expiry
        node("quiet").cpu(10).memory(100).build(),
    ]
    state, plugin = state_with(*nodes, pods=2, now=1000.0)
    by_name = dict(zip(state.node_names, slots(state, plugin), strict=True))
    assert by_name == {"fresh": 0, "stale": 0, "quiet": 2}
    job = state.jobs["default/web"]
    reasons = plugin.explain(state, job, state.pending_pods(job), np.arange(3))
    assert reasons[Refusal(METRIC_EXPIRED, "node(s) nodeMetric expired")] == 1
    for args, stale in (
        ({"enableScheduleWhenNodeMetricsExpired": True}, 2),
        ({"filterExpiredNodeMetrics": False}, 2),
    ):
        plugin = load_aware(args)
        plugin.setup(state)
        by_name = dict(zip(state.node_names, slots(state, plugin), strict=True))
        assert by_name["stale"] == stale


def test_reserved_pods_raise_the_estimate_until_unreserved() -> None:
    state, plugin = state_with(loaded("n1", 4.0), pods=2)
    job = state.jobs["default/web"]
    plan = Plan({"default/web-1": 0, "default/web-2": 0})
    plugin.reserve(state, job, plan)
    assert slots(state, plugin) == [0]  # 4.0 + 2 x 0.85 = 5.7; a third would be 6.55
    plugin.unreserve(state, job, plan)
    assert slots(state, plugin) == [2]


def test_score_prefers_the_idle_node_and_zero_for_unreported() -> None:
    state, plugin = state_with(
        loaded("busy", 5.0, 50), loaded("idle", 0.0, 0), node("quiet").cpu(10).memory(100).build()
    )
    job = state.jobs["default/web"]
    scores = dict(
        zip(state.node_names, plugin.score_nodes(state, job, np.arange(3)).tolist(), strict=True)
    )
    assert scores["idle"] > scores["busy"] > 0
    assert scores["quiet"] == 0
    # idle: cpu (10 - 0.85) / 10 -> 91; memory (100Gi - 140Mi) / 100Gi -> 99; mean 95.
    assert scores["idle"] == 95


def test_round_avoids_the_hot_node() -> None:
    c = cluster()
    c.nodes.extend([loaded("a-hot", 6.4), loaded("b-cool", 1.0)])
    c.submit(gang("default/web", pods=1).cpu(1))
    result = plan_round(c.snapshot(), Profile.default())
    assert result.placements["default/web-1"].node == "b-cool"


def test_default_estimator_takes_the_larger_of_limit_and_request() -> None:
    # Koordinator v1.7 estimator/default_estimator_test.go: max(limit, request) x factor, capped
    # at the limit; nothing asked of cpu or memory counts 250m / 200Mi, unscaled.
    from scheduler.model import PodInfo
    from scheduler.plugins.loadaware_estimate import estimate_pod

    factors = {"cpu": 85, "memory": 70}
    burst = PodInfo("default", "p", "j", requests={"cpu": 1000}, limits={"cpu": 4000})
    assert estimate_pod(burst, factors)["cpu"] == 3400
    empty = PodInfo("default", "q", "j")
    assert estimate_pod(empty, factors) == {"cpu": 250, "memory": 200 * 1024 * 1024}


def test_defaults_are_replaced_by_given_thresholds_and_weights() -> None:
    plugin = load_aware({"usageThresholds": {"memory": 80}, "dominantResourceWeight": 1})
    assert plugin.thresholds == {"memory": 80}  # cpu is no longer checked
    assert plugin.weights == {}  # a dominant weight alone: no per-resource weights
    assert plugin.factors == {"cpu": 85, "memory": 70}


def test_prod_pods_follow_koordinators_priority_classes() -> None:
    # apis/extension/priority.go and priority_utils.go: label, then band, then QoS.
    from scheduler.model import PodInfo
    from scheduler.plugins.loadaware_estimate import is_prod

    def pod(priority: int = 0, labels: dict[str, str] | None = None, cpu: int = 1000) -> PodInfo:
        return PodInfo("d", "p", "j", requests={"cpu": cpu}, priority=priority, labels=labels or {})

    assert is_prod(pod(9999)) and not is_prod(pod(5000)) and not is_prod(pod(7500))
    assert not is_prod(pod(9999, {"koordinator.sh/priority-class": "koord-batch"}))
    assert is_prod(pod())  # no class: LS QoS, which is prod
    assert not is_prod(pod(cpu=0))  # BestEffort: BE, which is batch
    assert not is_prod(pod(labels={"koordinator.sh/qosClass": "BE"}))


def test_aggregated_arguments_are_checked() -> None:
    from scheduler.profile import check_args

    good = {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95"}
    assert (
        check_args({"LoadAware": {"aggregated": {**good, "usageAggregatedDuration": "5m"}}}) == {}
    )
    problems = check_args(
        {"LoadAware": {"aggregated": {**good, "usageAggregatedDuration": "soon"}}}
    )
    assert "usageAggregatedDuration" in problems["LoadAware.aggregated"]
    problems = check_args({"LoadAware": {"aggregated": {"usageAggregationType": "p42"}}})
    assert "expected one of avg, p50" in problems["LoadAware.aggregated"]
