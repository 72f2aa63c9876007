"""What every round must keep, checked from the round's inputs alone (`check_invariants`).

No resource over-allocated, gangs all or nothing, MustGather honoured (one domain, read from the
nodes' labels), victims strictly lower priority (or reclaimed by a quota within its min from one
using more than its min) and never protected, and no quota admitted past its runtime quota. The
runtime quota is computed here, not with the engine's quota code, from Koordinator's rule as
written (koordinator.md, "Elastic quota"):
each quota first gets what it asks for up to its min; what the cluster has left is shared by
weight (the shared weight, else the max) among the quotas that ask for more, none getting more than
it asks for (capped at its max). The sharing is solved exactly, in fractions, as a water level.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from fractions import Fraction

from scheduler import ClusterSnapshot, RoundResult
from scheduler.model import JobInfo, NodeInfo, PodInfo, QuotaInfo, TopologyLayerSpec

PROTECT = "scheduling.koordinator.sh/disable-preemptible"
Amounts = dict[str, dict[str, int]]


def runtime_quota(
    quotas: Mapping[str, QuotaInfo], asked: Amounts, total: Mapping[str, int], r: str
) -> dict[str, Fraction]:
    """Runtime quota of flat quotas for resource `r` (Koordinator's rule, stated above)."""
    wants = {n: min(asked[n][r], q.max.get(r, asked[n][r])) for n, q in quotas.items()}
    runtime = {n: Fraction(min(wants[n], q.min.get(r, 0))) for n, q in quotas.items()}
    held = sum(
        runtime[n] if q.allow_lent else max(runtime[n], q.min.get(r, 0)) for n, q in quotas.items()
    )
    left = Fraction(max(0, total.get(r, 0) - held))
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


def _domain(snap: ClusterSnapshot, node: NodeInfo, layer: str) -> tuple[str, ...] | None:
    """The node's domain at `layer`: the path of its label values from the top layer down
    (koordinator.md, "Network topology": the first of a layer's label keys the node has; a node
    without the label of the layer just above the nodes is a domain of its own there; the node
    itself at a layer without labels); None when it misses a higher label (outside the tree)."""
    assert snap.topology is not None
    specs = {spec.name: spec for spec in snap.topology.layers}
    parents = {spec.parent for spec in snap.topology.layers if spec.label_keys}
    lowest = next(s.name for s in snap.topology.layers if s.label_keys and s.name not in parents)
    chain: list[TopologyLayerSpec] = []
    current: str | None = layer
    while current is not None:
        chain.append(specs[current])
        current = specs[current].parent
    path: list[str] = []
    for spec in reversed(chain):
        found = [node.labels[key] for key in spec.label_keys if key in node.labels]
        if found:
            path.append(found[0])
        elif not spec.label_keys or spec.name == lowest:
            path.append(node.name)
        else:
            return None
    return tuple(path)


def _sums(pods: list[PodInfo]) -> Amounts:
    """Requests summed per quota."""
    sums: Amounts = defaultdict(lambda: defaultdict(int))
    for pod in pods:
        if pod.quota is not None:
            for r, v in pod.requests.items():
                sums[pod.quota][r] += int(v)
    return sums


def check_invariants(snap: ClusterSnapshot, result: RoundResult) -> None:
    nodes = {n.name: n for n in snap.nodes}
    pods = {p.key: p for p in snap.pods}
    jobs = {j.id: j for j in snap.jobs}
    load: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for p in snap.pods:
        if p.consumes_node:
            for r, v in p.requests.items():
                load[p.node or ""][r] += v
    for key, placed in result.placements.items():
        for r, v in pods[key].requests.items():
            load[placed.node][r] += v
    for name, used in load.items():
        for r, v in used.items():
            assert v <= nodes[name].allocatable.get(r, 0), (name, r)
    for job in snap.jobs:
        placed = [k for k in job.pod_keys if k in result.placements]
        assert len(placed) in (0, len(job.pod_keys)), job.id  # min-available = total here
        for gather in job.topology.gather if job.topology and placed else ():
            if gather.strategy != "MustGather":
                continue
            domains = {
                _domain(snap, nodes[result.placements[k].node], gather.layer) for k in placed
            }
            assert len(domains) == 1 and None not in domains, (job.id, domains)
    _check_quotas(snap, result, pods, jobs)


def _check_quotas(
    snap: ClusterSnapshot,
    result: RoundResult,
    pods: Mapping[str, PodInfo],
    jobs: Mapping[str, JobInfo],
) -> None:
    quotas = {q.name: q for q in snap.quotas}
    assert all(q.parent is None for q in quotas.values()), "the oracle covers flat quotas"
    used = _sums([p for p in snap.pods if p.consumes_node])
    asked = _sums([p for p in snap.pods if p.consumes_node or p.is_pending])
    total: dict[str, int] = defaultdict(int)
    for n in snap.nodes:
        for r, v in n.allocatable.items():
            total[r] += int(v)

    for record in result.preemptions:
        preemptor = jobs[record.preemptor]
        for key in record.victim_pods:
            victim = pods[key]
            assert victim.labels.get(PROTECT) != "true"
            if victim.priority >= preemptor.priority:
                # A reclaim: by a quota that stays within its min, from another quota that uses
                # more than its min.
                claim = _sums([pods[k] for k in preemptor.pod_keys])
                assert len(claim) == 1 and victim.quota in quotas, key
                (mine,) = claim
                assert mine != victim.quota and quotas[mine].min, key
                assert all(
                    used[mine][r] + v <= quotas[mine].min[r]
                    for r, v in claim[mine].items()
                    if r in quotas[mine].min
                ), key
                assert any(
                    used[victim.quota][r] > quotas[victim.quota].min.get(r, 0)
                    for r in used[victim.quota]
                ), key
    added = _sums([pods[key] for key in result.placements])
    for name, amounts in added.items():
        if name not in quotas:
            continue
        q = quotas[name]
        for r, v in amounts.items():
            if v <= 0 or r not in set(q.min) | set(q.max):
                continue  # a quota limits only the dimensions its min/max declare
            after = used[name][r] + v
            assert after <= q.max.get(r, after), (name, r, "past its max")
            # The engine shares in whole units: one unit per quota of rounding either way.
            limit = runtime_quota(quotas, asked, total, r)[name] + len(quotas)
            assert after <= limit, (name, r, after, float(limit))
