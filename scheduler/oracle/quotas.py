"""Elastic quotas, by Koordinator's rule as written (koordinator.md, "Elastic quota"), computed
here and never with the engine's quota code.

Runtime quota: each quota first gets what it asks for up to its min; what the cluster has left
(a quota that may not lend keeps its whole min) is shared by weight (the shared weight, else the
max) among the quotas that ask for more, none getting more than it asks for, capped at its max.
The sharing is solved exactly, in fractions, as a water level. As Koordinator's
GroupQuotaManager: the cluster's total is first reduced by what bound pods outside the quotas use
(pods of no quota, of a quota that does not exist, of the default or system quota:
`updateClusterTotalResourceNoLock`), those two quotas are held to their max alone, and mins
that add up past the total are scaled down to min x total / sum of mins
(`scale_minquota_when_over_root_res.go`, EnableMinQuotaScale, on by default).

The Quota rule: no quota is admitted past its max, nor past its runtime quota (plus one unit per
quota: the engine shares in whole units, rounding each quota's share either way), in the
dimensions its min or max declares. The runtime part covers flat quotas; with a quota tree only
the max is checked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from fractions import Fraction

from scheduler.model import PodInfo, QuotaInfo
from scheduler.oracle.view import RoundView, holds_node
from scheduler.oracle.violation import QUOTA, Violation
from scheduler.vocabulary import DEFAULT_QUOTA, SYSTEM_QUOTA

# Koordinator's two quotas beside the tree: limited by their max only.
_BESIDE = frozenset({DEFAULT_QUOTA, SYSTEM_QUOTA})

Amounts = dict[str, dict[str, int]]


def runtime_quota(
    quotas: Mapping[str, QuotaInfo], asked: Amounts, total: Mapping[str, int], r: str
) -> dict[str, Fraction]:
    """Runtime quota of flat quotas for resource `r` (Koordinator's rule, stated above)."""
    wants = {n: min(asked[n][r], q.max.get(r, asked[n][r])) for n, q in quotas.items()}
    mins = {n: Fraction(q.min.get(r, 0)) for n, q in quotas.items()}
    all_mins = sum(mins.values(), Fraction(0))
    if all_mins > total.get(r, 0):  # scaled down in proportion (the engine rounds them down)
        mins = {n: m * max(0, total.get(r, 0)) / all_mins for n, m in mins.items()}
    runtime = {n: min(Fraction(wants[n]), mins[n]) for n in quotas}
    held = sum(
        (runtime[n] if q.allow_lent else max(runtime[n], mins[n]) for n, q in quotas.items()),
        Fraction(0),
    )
    left = max(Fraction(0), total.get(r, 0) - held)
    weight = {n: Fraction((q.shared_weight or q.max).get(r, 0)) for n, q in quotas.items()}
    hungry = {n for n in quotas if wants[n] > runtime[n] and weight[n] > 0}
    while hungry and left > 0:
        level = left / sum(weight[n] for n in hungry)  # every hungry quota gets level x weight
        full = {n for n in hungry if wants[n] - runtime[n] <= level * weight[n]}
        if not full:
            for n in hungry:
                runtime[n] += level * weight[n]
            break
        for n in full:  # these ask for less than their share: give it, share the rest again
            left -= wants[n] - runtime[n]
            runtime[n] = Fraction(wants[n])
        hungry -= full
    return runtime


def quota_sums(pods: Iterable[PodInfo]) -> Amounts:
    """Requests summed per quota."""
    sums: Amounts = defaultdict(lambda: defaultdict(int))
    for pod in pods:
        if pod.quota is not None:
            for r, v in pod.requests.items():
                sums[pod.quota][r] += int(v)
    return sums


def quota_used(view: RoundView) -> Amounts:
    return quota_sums(p for p in view.snapshot.pods if holds_node(p))


def check_quotas(view: RoundView) -> list[Violation]:
    snap = view.snapshot
    quotas = {q.name: q for q in snap.quotas}
    flat = all(q.parent is None for q in quotas.values())
    used = quota_used(view)
    asked = quota_sums(p for p in snap.pods if holds_node(p) or p.is_pending)
    total: dict[str, int] = defaultdict(int)
    for n in snap.nodes:
        for r, v in n.allocatable.items():
            total[r] += int(v)
    for pod in snap.pods:  # bound at the round's start, outside the shared quotas
        if pod.consumes_node and (pod.quota not in quotas or pod.quota in _BESIDE):
            for r, v in pod.requests.items():
                total[r] = max(0, total[r] - int(v))
    shared = {n: q for n, q in quotas.items() if n not in _BESIDE}
    added = quota_sums(view.pods[k] for k in view.result.placements if k in view.pods)
    found = []
    runtimes: dict[str, dict[str, Fraction]] = {}
    for name, amounts in sorted(added.items()):
        q = quotas.get(name)
        if q is None:
            continue
        for r, v in sorted(amounts.items()):
            if v <= 0 or r not in set(q.min) | set(q.max):
                continue  # a quota limits only the dimensions its min/max declare
            after = used[name][r] + v
            problem = ""
            if r in q.max and after > q.max[r]:
                problem = f"past its max {q.max[r]}"
            elif flat and name in shared:
                if r not in runtimes:
                    runtimes[r] = runtime_quota(shared, asked, total, r)
                limit = runtimes[r][name] + len(quotas)
                if after > limit:
                    problem = f"past its runtime quota {float(runtimes[r][name]):g}"
            if problem:
                found.append(
                    Violation(QUOTA, "", "", "", f"quota {name} admitted to {r} {after}, {problem}")
                )
    return found
