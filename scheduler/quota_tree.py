"""Elastic quota arithmetic: the quota tree, used and requested amounts, and runtime quota.

Runtime quota (koordinator.md, "Elastic quota and priority") is computed top-down per resource:
the pool of a level (for the roots the cluster's allocatable less what pods outside the tree use,
below the parent's runtime) first gives every child its request up to its min (a child that does
not lend keeps its whole min out of the pool), then water-fills what is left by shared weight,
each child capped at its request and its max. A quota's request is its own pods' requests plus its
children's, capped at its max.

As Koordinator's GroupQuotaManager does (`elasticquota/core/group_quota_manager.go`):
- when the children's mins add up to more than the pool, each child's min is scaled down to its
  share of the pool, min x pool / sum of mins (`scale_minquota_when_over_root_res.go`,
  EnableMinQuotaScale, on by default); the scaled min is the child's guarantee;
- the default and system quotas (`koordinator-default-quota`, `koordinator-system-quota`) stand
  beside the tree: their runtime is their max, and what they use, with every pod of no quota of
  the tree (Koordinator counts those in the default quota), is taken out of the cluster's total
  before the tree shares it (`updateClusterTotalResourceNoLock`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.model import PodInfo, QuotaInfo
from scheduler.vocabulary import DEFAULT_QUOTA, SYSTEM_QUOTA

UNBOUNDED = 1 << 62
BESIDE_TREE = frozenset({DEFAULT_QUOTA, SYSTEM_QUOTA})
"""Quotas whose runtime is their max and whose use the tree's pool leaves out."""


@dataclass
class QuotaTree:
    quotas: dict[str, QuotaInfo]
    children: dict[str | None, list[str]] = field(default_factory=dict)

    @staticmethod
    def build(quotas: Iterable[QuotaInfo]) -> QuotaTree:
        by_name = {q.name: q for q in quotas}
        tree = QuotaTree(by_name)
        for q in sorted(by_name.values(), key=lambda q: q.name):
            parent = q.parent if q.parent in by_name else None
            tree.children.setdefault(parent, []).append(q.name)
        return tree

    def ancestors(self, name: str) -> list[str]:
        """The quota itself, then its parents up to the root."""
        chain: list[str] = []
        current: str | None = name
        while current is not None and current in self.quotas and current not in chain:
            chain.append(current)
            current = self.quotas[current].parent
        return chain

    def checked_dimensions(self, name: str) -> set[str]:
        q = self.quotas[name]
        return set(q.max) | set(q.min)


def add_into(total: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    for r, v in amounts.items():
        total[r] = total.get(r, 0) + sign * int(v)


def quota_sums(
    tree: QuotaTree, pods: Iterable[PodInfo], include_pending: bool
) -> dict[str, dict[str, int]]:
    """Per quota (children rolled up into parents): requests of bound pods (+ pending ones)."""
    sums: dict[str, dict[str, int]] = {name: {} for name in tree.quotas}
    for pod in pods:
        if pod.quota not in tree.quotas:
            continue
        if not (pod.consumes_node or (include_pending and pod.is_pending)):
            continue
        for name in tree.ancestors(pod.quota):
            add_into(sums[name], pod.requests)
    return sums


def outside_used(tree: QuotaTree, pods: Iterable[PodInfo]) -> dict[str, int]:
    """What bound pods outside the shared tree use: pods of the default or system quota, of no
    quota, or of a quota the tree does not have (Koordinator counts those in the default one)."""
    used: dict[str, int] = {}
    for pod in pods:
        if pod.consumes_node and (pod.quota not in tree.quotas or pod.quota in BESIDE_TREE):
            add_into(used, pod.requests)
    return used


def tree_total(allocatable: Mapping[str, int], outside: Mapping[str, int]) -> dict[str, int]:
    """The pool the tree shares: the cluster's total less what is used outside it."""
    return {r: max(0, int(v) - int(outside.get(r, 0))) for r, v in allocatable.items()}


def runtime_quota(
    tree: QuotaTree,
    requests: Mapping[str, Mapping[str, int]],
    cluster_total: Mapping[str, int],
    *,
    scale_min: bool = True,
    mins: dict[str, dict[str, int]] | None = None,
) -> dict[str, dict[str, int]]:
    """Runtime quota of every quota for every resource that someone requests.

    `cluster_total` is the pool of the roots (see `tree_total`); with `scale_min`, mins that
    outgrow their level's pool are scaled down; `mins`, when given, receives each quota's
    guaranteed min per resource computed (scaled or not)."""
    resources = sorted({r for req in requests.values() for r in req})
    runtime: dict[str, dict[str, int]] = {name: {} for name in tree.quotas}
    guaranteed = mins if mins is not None else {}
    for name in tree.quotas:
        guaranteed.setdefault(name, {})
    for r in resources:
        _fill(tree, None, int(cluster_total.get(r, 0)), r, requests, runtime, scale_min, guaranteed)
        for name in BESIDE_TREE & tree.quotas.keys():
            runtime[name][r] = int(tree.quotas[name].max.get(r, UNBOUNDED))
    return runtime


def scaled_mins(quotas: list[QuotaInfo], pool: int, r: str) -> dict[str, int]:
    """Each child's min of `r`, scaled down in proportion when together they exceed `pool`
    (Koordinator's getScaledMinQuota: min x pool / sum, rounded down)."""
    wanted = {q.name: int(q.min.get(r, 0)) for q in quotas}
    total = sum(wanted.values())
    if pool >= total:
        return wanted
    if pool <= 0:
        return {name: 0 for name in wanted}
    return {name: pool * m // total for name, m in wanted.items()}


def _capped_request(q: QuotaInfo, r: str, requests: Mapping[str, Mapping[str, int]]) -> int:
    return min(int(requests.get(q.name, {}).get(r, 0)), int(q.max.get(r, UNBOUNDED)))


def _fill(
    tree: QuotaTree,
    parent: str | None,
    pool: int,
    r: str,
    requests: Mapping[str, Mapping[str, int]],
    runtime: dict[str, dict[str, int]],
    scale_min: bool,
    mins: dict[str, dict[str, int]],
) -> None:
    names = tree.children.get(parent, [])
    if parent is None:
        names = [n for n in names if n not in BESIDE_TREE]
    if not names:
        return
    quotas = [tree.quotas[n] for n in names]
    if scale_min:
        floor = scaled_mins(quotas, pool, r)
    else:
        floor = {q.name: int(q.min.get(r, 0)) for q in quotas}
    for q in quotas:
        if r in q.min:
            mins[q.name][r] = floor[q.name]
    demand = {q.name: _capped_request(q, r, requests) for q in quotas}
    given = {q.name: min(demand[q.name], floor[q.name]) for q in quotas}
    held = sum(given[q.name] if q.allow_lent else max(given[q.name], floor[q.name]) for q in quotas)
    left = max(0, pool - held)
    active = [q for q in quotas if demand[q.name] > given[q.name] and _weight(q, r) > 0]
    while left > 0 and active:
        total_weight = sum(_weight(q, r) for q in active)
        handed = 0
        for q in active:
            share = left * _weight(q, r) // total_weight
            take = min(share, demand[q.name] - given[q.name])
            given[q.name] += take
            handed += take
        left -= handed
        still = [q for q in active if demand[q.name] > given[q.name]]
        if handed == 0:
            for q in still[:left]:  # integer remainders: one unit each, in name order
                given[q.name] += 1
                left -= 1
            break
        active = still
    for q in quotas:
        runtime[q.name][r] = given[q.name]
        _fill(tree, q.name, given[q.name], r, requests, runtime, scale_min, mins)


def _weight(q: QuotaInfo, r: str) -> int:
    """The quota's share weight for `r` (Koordinator's GetSharedWeight): its shared-weight
    annotation when it gives any weight, a resource it leaves out weighing nothing; else (none,
    or all zero) its max."""
    weights = q.shared_weight
    if weights is not None and any(int(v) for v in weights.values()):
        return int(weights.get(r, 0))
    return int(q.max.get(r, UNBOUNDED)) if r in q.max else max(1, int(q.min.get(r, 1)))
