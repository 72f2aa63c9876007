"""Kubernetes documents kept in rows (taints, tolerations, required node affinity, a gang's
topology rule) read into the engine's specs, leniently: a document the engine cannot read gives
a rule that says so (the job is then unschedulable with that reason), never an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, get_args

from scheduler.model import (
    GatherStrategy,
    LayerGather,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
    TopologyRule,
)


def parse_taints(raw: Iterable[Mapping[str, Any]]) -> tuple[Taint, ...]:
    return tuple(
        Taint(
            key=t.get("key", ""),
            value=t.get("value", "") or "",
            effect=t.get("effect", "NoSchedule"),
        )
        for t in raw
    )


def parse_tolerations(raw: Iterable[Mapping[str, Any]]) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            key=t.get("key", "") or "",
            operator=t.get("operator", "Equal") or "Equal",
            value=t.get("value", "") or "",
            effect=t.get("effect", "") or "",
        )
        for t in raw
    )


# What a pod whose stored affinity cannot be read requires: a term no node matches (`In` with
# no values), so it waits with the node-affinity reason instead of failing everyone's round.
UNREADABLE_AFFINITY = (
    NodeSelectorTerm(
        match_expressions=(NodeSelectorRequirement(key="", operator="In", values=()),)
    ),
)


def parse_required_affinity(affinity: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """The pod's required node affinity terms, their matchExpressions and matchFields. The doors
    refuse an affinity the API server would (`kubenames.affinity_errors`); a row written before
    they did, or by hand, matches no node."""
    try:
        required = (affinity.get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}
        terms = []
        for term in required.get("nodeSelectorTerms") or []:
            expressions = _requirements(term.get("matchExpressions") or [])
            fields = _requirements(term.get("matchFields") or [])
            if expressions is None or fields is None:
                return UNREADABLE_AFFINITY
            terms.append(NodeSelectorTerm(match_expressions=expressions, match_fields=fields))
        return tuple(terms)
    except (AttributeError, KeyError, TypeError):
        return UNREADABLE_AFFINITY


def _requirements(raw: Iterable[Mapping[str, Any]]) -> tuple[NodeSelectorRequirement, ...] | None:
    """matchExpressions or matchFields entries; None when a key or value is not a string."""
    found = []
    for e in raw:
        values = tuple(e.get("values") or ())
        if not isinstance(e["key"], str) or not all(isinstance(v, str) for v in values):
            return None
        found.append(NodeSelectorRequirement(key=e["key"], operator=e["operator"], values=values))
    return tuple(found)


def parse_topology_rule(spec: Mapping[str, Any]) -> TopologyRule | None:
    """Koordinator's `{"gatherStrategy": [{"layer", "strategy"}]}` (plus our podCountMultiple).

    Never raises on a stored value: a document the doors should have refused (a row written
    before they did, or by hand) becomes a rule no domain satisfies, so that job alone waits,
    with the reason in its decision, and the round and every other job go on."""
    if not isinstance(spec, Mapping):
        return _unreadable_rule("it is not a JSON object")
    rules = spec.get("gatherStrategy") or []
    if not isinstance(rules, list) or not all(
        isinstance(g, Mapping)
        and isinstance(g.get("layer"), str)
        and g.get("strategy") in _GATHER_STRATEGIES
        for g in rules
    ):
        return _unreadable_rule("gatherStrategy must be a list of {layer, strategy}")
    gather = tuple(LayerGather(layer=g["layer"], strategy=g["strategy"]) for g in rules)
    multiple = pod_count_multiple(spec.get("podCountMultiple", 1))
    if multiple is None:
        shown = repr(spec.get("podCountMultiple"))[:40]
        return _unreadable_rule(f"podCountMultiple must be a positive integer, got {shown}")
    if not gather and multiple == 1:
        return None
    return TopologyRule(gather=gather, pod_count_multiple=multiple)


_GATHER_STRATEGIES = get_args(GatherStrategy)


def pod_count_multiple(value: Any) -> int | None:
    """The manifest reader's rule for podCountMultiple (a positive whole number, not a boolean;
    koordweb/manifests/parse_workload.py): the value, or None when it breaks the rule."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _unreadable_rule(why: str) -> TopologyRule:
    """A MustGather on a layer no cluster defines: the topology plugin refuses the job with its
    own words ("unknown topology layer(s) ...") naming what is wrong with the stored document."""
    layer = f"(unreadable network-topology-spec: {why})"
    return TopologyRule(gather=(LayerGather(layer=layer, strategy="MustGather"),))
