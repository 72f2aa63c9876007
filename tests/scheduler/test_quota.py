"""Elastic quota: runtime water-filling, admission with named dimensions, in-quota preemption."""

from __future__ import annotations

from scheduler import PodInfo, QuotaInfo, plan_round
from scheduler.quota_tree import QuotaTree, outside_used, runtime_quota, tree_total
from scheduler.vocabulary import DEFAULT_QUOTA
from tests.scheduler.builders import CORE, cluster, gang, node, pod


def runtime(quotas: list[QuotaInfo], requests: dict[str, int], total: int) -> dict[str, int]:
    tree = QuotaTree.build(quotas)
    reqs = {name: {"cpu": amount} for name, amount in requests.items()}
    for q in quotas:  # parents request what their children do
        if q.parent:
            reqs.setdefault(q.parent, {"cpu": 0})
            reqs[q.parent]["cpu"] += requests.get(q.name, 0)
    out = runtime_quota(tree, reqs, {"cpu": total})
    return {name: out[name].get("cpu", 0) for name in out}


CASES = [
    # (quotas (name, min, max, weight), requests, total, expected runtime)
    ([("a", 10, 100, None), ("b", 10, 100, None)], {"a": 5, "b": 50}, 60, {"a": 5, "b": 50}),
    ([("a", 10, 100, None), ("b", 10, 100, None)], {"a": 40, "b": 40}, 60, {"a": 30, "b": 30}),
    ([("a", 10, 100, 1), ("b", 10, 100, 3)], {"a": 100, "b": 100}, 60, {"a": 20, "b": 40}),
    ([("a", 10, 20, 1), ("b", 0, 100, 1)], {"a": 100, "b": 100}, 60, {"a": 20, "b": 40}),
    ([("a", 10, 20, None), ("b", 0, 100, None)], {"a": 100, "b": 100}, 60, {"a": 19, "b": 41}),
    ([("a", 50, 100, None), ("b", 0, 100, None)], {"a": 0, "b": 100}, 60, {"a": 0, "b": 60}),
]


def test_runtime_quota_water_filling_table() -> None:
    for specs, requests, total, expected in CASES:
        quotas = [
            QuotaInfo(n, {"cpu": lo}, {"cpu": hi}, None, {"cpu": w} if w else None)
            for n, lo, hi, w in specs
        ]
        assert runtime(quotas, requests, total) == expected, (specs, requests)


def test_shared_weight_as_koordinator_reads_it() -> None:
    """GetSharedWeight: a weight for memory only weighs cpu at nothing (a gets no cpu beyond
    its min); an all-zero weight is no weight, so max weighs (as with none)."""
    memory_only = QuotaInfo("a", {"cpu": 10}, {"cpu": 100}, None, {"memory": 5})
    other = QuotaInfo("b", {"cpu": 10}, {"cpu": 100})
    assert runtime([memory_only, other], {"a": 100, "b": 100}, 60) == {"a": 10, "b": 50}
    zero = QuotaInfo("a", {"cpu": 10}, {"cpu": 100}, None, {"cpu": 0, "memory": 0})
    assert runtime([zero, other], {"a": 40, "b": 40}, 60) == {"a": 30, "b": 30}


def test_quota_that_does_not_lend_keeps_its_min_out_of_the_pool() -> None:
    quotas = [
        QuotaInfo("a", {"cpu": 50}, {"cpu": 100}, allow_lent=False),
        QuotaInfo("b", {"cpu": 0}, {"cpu": 100}),
    ]
    assert runtime(quotas, {"a": 0, "b": 100}, 60) == {"a": 0, "b": 10}


def test_runtime_flows_down_the_tree() -> None:
    quotas = [
        QuotaInfo("org", {"cpu": 0}, {"cpu": 40}),
        QuotaInfo("team-1", {"cpu": 10}, {"cpu": 40}, parent="org"),
        QuotaInfo("team-2", {"cpu": 10}, {"cpu": 40}, parent="org"),
    ]
    got = runtime(quotas, {"team-1": 40, "team-2": 40}, 100)
    assert got == {"org": 40, "team-1": 20, "team-2": 20}


def test_admission_names_the_exceeded_dimension_and_the_shortfall() -> None:
    c = cluster().node(node("a").cpu(64))
    c.quota(QuotaInfo("team", {"cpu": 8000}, {"cpu": 8000}))
    c.running(pod("old").cpu(6).quota("team").priority(50).on("a"))
    c.submit(gang("team/new", pods=1).cpu(4).quota("team").priority(10))
    verdict = plan_round(c.snapshot(), CORE).unschedulable["team/new"]
    assert verdict.reason == "Insufficient quotas, quotaName: team, exceedDimensions: [cpu]"
    assert verdict.cause is not None
    assert (verdict.cause.code, verdict.cause.plugin) == ("QuotaInsufficient", "ElasticQuota")
    assert verdict.cause.values["quota"] == "team"
    assert verdict.details["quota_shortfall"] == {"team": {"cpu": 2000}}
    assert verdict.details["counterfactual"] == {"quota_increase": {"team": {"cpu": 2000}}}


def test_in_quota_preemption_takes_a_lower_priority_pod_of_the_same_quota() -> None:
    c = cluster().node(node("a").cpu(64))
    c.quota(QuotaInfo("team", {"cpu": 8000}, {"cpu": 8000}))
    c.quota(QuotaInfo("other", {"cpu": 8000}, {"cpu": 64000}))
    c.running(pod("mine-low").cpu(6).quota("team").priority(1).on("a"))
    c.running(pod("theirs-low").cpu(6).quota("other").priority(1).on("a"))
    c.submit(gang("team/new", pods=1).cpu(4).quota("team").priority(10))
    [record] = plan_round(c.snapshot(), CORE).preemptions
    assert record.victim_pods == ("default/mine-low",)
    assert record.rule == "InQuota"


def test_later_jobs_see_quota_used_by_earlier_ones() -> None:
    c = cluster().node(node("a").cpu(64))
    c.quota(QuotaInfo("team", {"cpu": 8000}, {"cpu": 8000}))
    c.submit(
        gang("team/first", pods=1).cpu(6).quota("team").priority(10),
        gang("team/second", pods=1).cpu(6).quota("team").priority(5),
    )
    result = plan_round(c.snapshot(), CORE)
    assert list(result.placements) == ["team/first-1"]
    assert "Insufficient quotas" in result.unschedulable["team/second"].reason


def test_a_quota_within_its_min_reclaims_from_a_borrowing_quota() -> None:
    # team-b borrows the whole node (min 0); team-a asks for its guaranteed 8 cores: runtime
    # quota gives team-a 8 and team-b 8, so team-b's pod is reclaimed despite its priority.
    c = cluster().node(node("a").cpu(16))
    c.quota(QuotaInfo("team-a", {"cpu": 8000}, {"cpu": 16000}))
    c.quota(QuotaInfo("team-b", {"cpu": 0}, {"cpu": 16000}))
    c.running(pod("borrower").cpu(16).quota("team-b").priority(10).on("a"))
    c.submit(gang("team/a-job", pods=1).cpu(8).quota("team-a").priority(5))
    result = plan_round(c.snapshot(), CORE)
    [record] = result.preemptions
    assert record.victim_pods == ("default/borrower",)
    assert record.rule == "QuotaReclaim"  # the victim's priority is higher: only reclaim allows it
    # the runtime quota the round admitted by, as the result reports it
    assert result.runtime_quota == {"team-a": {"cpu": 8000}, "team-b": {"cpu": 8000}}


def test_a_lower_priority_victim_is_named_by_the_lower_priority_rule() -> None:
    c = cluster().node(node("a").cpu(16))
    c.running(pod("low").cpu(16).priority(1).on("a"))
    c.submit(gang("team/high", pods=1).cpu(8).priority(50))
    result = plan_round(c.snapshot(), CORE)
    [record] = result.preemptions
    assert record.rule == "LowerPriority"
    assert result.runtime_quota == {}  # no quotas, no runtime quota


def test_a_borrowing_quota_cannot_reclaim_from_higher_priorities() -> None:
    c = cluster().node(node("a").cpu(16))
    c.quota(QuotaInfo("team-a", {"cpu": 0}, {"cpu": 16000}))
    c.quota(QuotaInfo("team-b", {"cpu": 16000}, {"cpu": 16000}))
    c.running(pod("owner").cpu(16).quota("team-b").priority(10).on("a"))
    c.submit(gang("team/a-job", pods=1).cpu(8).quota("team-a").priority(5))
    result = plan_round(c.snapshot(), CORE)
    assert result.preemptions == ()


def test_mins_past_the_pool_are_scaled_down() -> None:
    """scale_minquota_when_over_root_res.go (TestGroupQuotaManager_MultiUpdateQuotaRequest_
    WithScaledMinQuota1): three children of min 100 under a parent holding 200 get 66 each
    (66.666 rounded down) and share the remainder; unscaled, each is promised 100 of the 200
    (the first two to come take the cluster, the third gets nothing)."""
    quotas = [QuotaInfo("p", {"cpu": 300}, {"cpu": 1000})] + [
        QuotaInfo(n, {"cpu": 100}, {"cpu": 1000}, "p") for n in "abc"
    ]
    scaled = runtime(quotas, {"a": 200, "b": 200, "c": 200}, 200)
    assert scaled["p"] == 200
    assert sorted(scaled[n] for n in "abc") == [66, 67, 67]
    tree = QuotaTree.build(quotas)
    reqs = {"a": {"cpu": 200}, "b": {"cpu": 200}, "c": {"cpu": 200}, "p": {"cpu": 600}}
    plain = runtime_quota(tree, reqs, {"cpu": 200}, scale_min=False)
    assert sorted(plain[n]["cpu"] for n in "abc") == [100, 100, 100]


def test_pods_outside_the_tree_shrink_its_pool() -> None:
    """updateClusterTotalResourceNoLock: what the default quota (and pods of no quota) use is
    taken out of the total before the tree shares it; the default quota's runtime is its max."""
    quotas = [
        QuotaInfo("qa", {"cpu": 60}, {"cpu": 100}),
        QuotaInfo("qb", {"cpu": 0}, {"cpu": 100}),
        QuotaInfo(DEFAULT_QUOTA, {}, {"cpu": 1000}),
    ]
    tree = QuotaTree.build(quotas)
    pods = [
        PodInfo("ns", "agent", "ns/agent", {"cpu": 20}, node="n", phase="Running"),
        PodInfo("ns", "d", "ns/d", {"cpu": 10}, node="n", quota=DEFAULT_QUOTA, phase="Running"),
    ]
    total = tree_total({"cpu": 100}, outside_used(tree, pods))
    assert total == {"cpu": 70}
    reqs = {"qa": {"cpu": 60}, "qb": {"cpu": 40}, DEFAULT_QUOTA: {"cpu": 500}}
    out = runtime_quota(tree, reqs, total)
    assert out["qb"]["cpu"] == 10 and out[DEFAULT_QUOTA]["cpu"] == 1000
