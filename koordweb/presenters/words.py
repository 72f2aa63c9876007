"""The vocabulary every sentence shares: layers and domains by name, pod counts, node reasons.

'BlockLayer/b1' reads 'block b1', the root domain 'the whole cluster', kube-scheduler's
'Insufficient nvidia.com/gpu' reads 'too little free GPUs'.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from koordweb.presenters.quantities import number, resource_name
from scheduler.vocabulary import CLUSTER_LAYER, NODE_LAYER

_LAYER_WORDS = {CLUSTER_LAYER: "cluster", NODE_LAYER: "node"}


def layer_word(layer: str) -> str:
    """'BlockLayer' -> 'block', 'SpineLayer' -> 'spine'."""
    if layer in _LAYER_WORDS:
        return _LAYER_WORDS[layer]
    word = layer.removesuffix("Layer") or layer
    return re.sub(r"(?<!^)(?=[A-Z])", " ", word).lower()


def domain_text(label: Any) -> str:
    """'BlockLayer/b1' -> 'block b1'; the root ('ClusterTopologyLayer/') -> 'the whole cluster'."""
    text = str(label or "")
    if text in ("", "nominated nodes"):
        return text or "the cluster"
    layer, _, name = text.partition("/")
    if layer == CLUSTER_LAYER or not name:
        return "the whole cluster"
    return f"{layer_word(layer)} {name}"


def topology_rule_text(spec: Any) -> str:
    """A job's network-topology rule in words: 'all in one block; preferably in one spine'."""
    spec = spec if isinstance(spec, dict) else {}
    parts: list[str] = []
    for rule in spec.get("gatherStrategy") or []:
        if not isinstance(rule, dict):
            continue
        where = layer_word(str(rule.get("layer") or ""))
        if rule.get("strategy") == "MustGather":
            parts.append(f"all in one {where}")
        else:
            parts.append(f"preferably in one {where}")
    multiple = spec.get("podCountMultiple")
    if isinstance(multiple, int) and multiple > 1:
        parts.append(f"pods placed in multiples of {multiple}")
    return "; ".join(parts) or "no constraint"


def pods(n: Any) -> str:
    count = int(n) if isinstance(n, (int, float)) else 0
    return f"{number(count)} pod{'' if count == 1 else 's'}"


def node_reason(reason: str) -> str:
    if reason.startswith("Insufficient "):
        return f"too little free {resource_name(reason.removeprefix('Insufficient '))}"
    if reason == "Too many pods":
        return "no pod slots left"
    return reason[:1].lower() + reason[1:]


def as_dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


_PREEMPTION_POLICIES = {
    "PreemptLowerPriority": "may preempt lower-priority jobs",
    "Never": "never preempts",
}


def preemption_policy_text(policy: str) -> str:
    """A pod's preemptionPolicy in words: 'may preempt lower-priority jobs', 'never preempts'."""
    return _PREEMPTION_POLICIES.get(policy, policy)


def gang_text(min_available: int, total: int, mode: str) -> str:
    """A gang's rule in words: a Strict gang starts its pods together (at least min-available of
    them); a NonStrict one lets each pod that fits start, once min-available of them can."""
    total = max(total, 1)
    least = min(max(min_available, 1), total)
    if total == 1:
        return "a single pod"
    if mode == "NonStrict":
        return f"pods may start as they fit, at least {number(least)} of {number(total)} together"
    if least == total:
        return f"all {number(total)} pods must start together"
    return f"at least {number(least)} of its {number(total)} pods must start together"
