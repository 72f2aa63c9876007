"""Elastic quotas, by Koordinator's rule as written (koordinator.md, "Elastic quota"), computed
here and never with the engine's quota code.

Runtime quota: each quota first gets what it asks for up to its min; what the cluster has left
(a quota that may not lend keeps its whole min) is shared by weight (the shared weight, else the
max) among the quotas that ask for more, none getting more than it asks for, capped at its max.
The sharing is solved exactly, in fractions, as a water level.

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

Amounts = dict[str, dict[str, int]]


def runtime_quota(
    quotas: Mapping[str, QuotaInfo], asked: Amounts, total: Mapping[str, int], r: str
) -> dict[str, Fraction]:
    """Runtime quota of flat quotas for resource `r` (Koordinator's rule, stated above)."""
    wants = {n: min(asked[n][r], q.max.get(r, asked[n][r])) for n, q in quotas.items()}
    runtime = {n: Fraction(min(wants[n], q.min.get(r, 0))) for n, q in quotas.items()}
    held = sum(
        (
            runtime[n] if q.allow_lent else max(runtime[n], Fraction(q.min.get(r, 0)))
            for n, q in quotas.items()
        ),
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
            elif flat:
                if r not in runtimes:
                    runtimes[r] = runtime_quota(quotas, asked, total, r)
                limit = runtimes[r][name] + len(quotas)
                if after > limit:
                    problem = f"past its runtime quota {float(runtimes[r][name]):g}"
            if problem:
                found.append(
                    Violation(QUOTA, "", "", "", f"quota {name} admitted to {r} {after}, {problem}")
                )
    return found
