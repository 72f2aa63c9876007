"""The vocabulary every sentence shares: layers and domains by name, pod counts, node reasons,
device kinds ('NPUs' for an Ascend job holding whole cards or AI cores, 'MLUs' for a Cambricon
slice, 'cards' for several kinds).

'BlockLayer/b1' reads 'block b1', the root domain 'the whole cluster', a node ruled out with the
code `Insufficient` for nvidia.com/gpu reads 'too little free GPUs'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordweb.presenters.quantities import gpu_hours_text, number, quantity_text, resource_name
from scheduler.api import causes
from scheduler.vocabulary import (
    CAMBRICON_MLU,
    CAMBRICON_MLU_VCORE,
    CLUSTER_LAYER,
    HUAWEI_NPU,
    NODE_LAYER,
    NPU_CORE,
)

_LAYER_WORDS = {CLUSTER_LAYER: "cluster", NODE_LAYER: "node"}


def layer_word(layer: str) -> str:
    """'BlockLayer' -> 'block', 'SpineLayer' -> 'spine'."""
    if layer in _LAYER_WORDS:
        return _LAYER_WORDS[layer]
    return spaced_words(layer.removesuffix("Layer") or layer)


def spaced_words(name: str) -> str:
    """A CamelCase name in lower-case words: 'SpineLayer' -> 'spine layer'."""
    return "".join(
        f" {char}" if char.isupper() and i else char for i, char in enumerate(name)
    ).lower()


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


def counted(n: Any, noun: str, nouns: str | None = None) -> str:
    """'1 node', '3 nodes', '1,000 nodes': a count with its noun, never 'node(s)'."""
    count = int(n) if isinstance(n, (int, float)) else 0
    return f"{number(count)} {noun if count == 1 else nouns or noun + 's'}"


def pods(n: Any) -> str:
    return counted(n, "pod")


# The device allocator's own device types, as a shortage names them.
_DEVICE_NAMES = {"gpu": "GPUs", "rdma": "RDMA NICs", "fpga": "FPGAs"}
# Node refusal codes (`causes`, a `NodeReason`'s code) that need no resource to be said.
_REFUSAL_WORDS = {
    causes.TOO_MANY_PODS: "with no pod slots left",
    causes.NODE_CORDONED: "cordoned",
    causes.NODE_AFFINITY: "with labels the job's node rule excludes",
    causes.TAINT_UNTOLERATED: "with a taint the job does not tolerate",
    causes.METRIC_EXPIRED: "with a usage report out of date (load-aware)",
}


def node_reason(reason: Mapping[str, Any]) -> str:
    """Why nodes were ruled out, said after their count ('997 with too little free GPUs', '3
    cordoned'), from a node reason's code and resource (`Cause.node_reasons`); a code this
    module does not know is said in its Filter's words."""
    code, resource = str(reason.get("code") or ""), str(reason.get("resource") or "")
    if code in _REFUSAL_WORDS:
        return _REFUSAL_WORDS[code]
    if code == causes.INSUFFICIENT and resource:
        return f"with too little free {_DEVICE_NAMES.get(resource) or resource_name(resource)}"
    if code in (causes.LOAD_OVER_THRESHOLD, causes.AGGREGATED_LOAD_OVER_THRESHOLD) and resource:
        average = "average " if code == causes.AGGREGATED_LOAD_OVER_THRESHOLD else ""
        return f"with {average}{resource_name(resource)} use above the load-aware threshold"
    return f"refused: {reason.get('text') or 'for another reason'}"


def nodes_ruled_out(reasons: Any, limit: int = 4) -> str:
    """Per-node reasons (`Cause.node_reasons`) as '1,012 with too little free GPUs, 3 cordoned',
    the `limit` largest counts first; reasons that read the same are one."""
    worded: dict[str, int] = {}
    for reason in reasons if isinstance(reasons, (list, tuple)) else ():
        if isinstance(reason, Mapping):
            words = node_reason(reason)
            worded[words] = worded.get(words, 0) + int(reason.get("nodes") or 0)
    ranked = sorted(worded.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return ", ".join(f"{number(n)} {words}" for words, n in ranked)


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


def priority_text(priority: int, priority_class: Any = None) -> str:
    """A job's priority: 'default priority (0)' without a class, else '9,000 (koord-prod)'."""
    name = getattr(priority_class, "name", "") if priority_class is not None else ""
    if not name:
        return f"default priority ({number(priority)})"
    return f"{number(priority)} ({name})"


def priority_class_text(priority_class: Any) -> str:
    """A class as a picker offers it: 'koord-prod (9,000)'."""
    return f"{priority_class.name} ({number(priority_class.value)})"


def job_priority_sentence(priority: int, priority_class: Any, policy: str) -> str:
    """The job page's priority line: 'default priority (0)' alone (with nothing below it a
    default job preempts nobody), else '9,000 (koord-prod), may preempt lower-priority jobs'."""
    text = priority_text(priority, priority_class)
    if priority_class is None and priority == 0:
        return text
    return f"{text}, {preemption_policy_text(policy)}"


def victims_sentence(named: list[str], hidden: int) -> str:
    """What a what-if would preempt, whole: 'Would preempt team/a, team/b and 2 jobs of other
    tenants.', 'Would preempt 1 job of another tenant.'; '' when nothing."""
    parts = list(named)
    if hidden:
        parts.append(
            "1 job of another tenant" if hidden == 1 else f"{hidden} jobs of other tenants"
        )
    if not parts:
        return ""
    listed = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    return f"Would preempt {listed}."


_QUOTA_FIELDS = {
    "min": "min",
    "max": "max",
    "shared_weight": "shared weight",
    "max_pending_jobs": "jobs that may wait",
    "max_pending_pods": "pods that may wait",
    "gpu_idle_alert_minutes": "idle alert (minutes)",
}


def quota_change_text(changes: Mapping[str, Any]) -> list[str]:
    """A quota change in words, one line per amount: 'max GPUs: 16 GPUs -> 32 GPUs'."""
    lines: list[str] = []
    for name, pair in sorted(changes.items()):
        word = _QUOTA_FIELDS.get(name, name.replace("_", " "))
        before, after = [*pair, None, None][:2] if isinstance(pair, list) else (None, pair)
        if isinstance(before, Mapping) or isinstance(after, Mapping):
            old, new = as_dict(before), as_dict(after)
            for resource in sorted(set(old) | set(new)):
                if old.get(resource) != new.get(resource):
                    lines.append(
                        f"{word} {resource_name(resource)}: "
                        f"{quantity_text(resource, old.get(resource))} → "
                        f"{quantity_text(resource, new.get(resource))}"
                    )
        else:
            lines.append(
                f"{word}: {'—' if before is None else number(before)} → "
                f"{'—' if after is None else number(after)}"
            )
    return lines


# The cards a request names, by kind: an Ascend card held in AI cores is still an NPU and a
# Cambricon MLU slice an MLU; a GPU share (or no card at all) reads GPUs.
_CARD_KINDS = (
    ("NPUs", (HUAWEI_NPU, NPU_CORE)),
    ("MLUs", (CAMBRICON_MLU, CAMBRICON_MLU_VCORE)),
)


def card_kind_word(requests: Mapping[str, Any]) -> str:
    """The plural word for the cards a pod asks for, whole or in shares: 'NPUs' (whole Ascend
    cards or AI cores), 'MLUs' (whole Cambricon cards or slices), else 'GPUs'."""
    for word, resources in _CARD_KINDS:
        if any(requests.get(resource) for resource in resources):
            return word
    return "GPUs"


def cards_word(words: Iterable[str]) -> str:
    """One word for the cards of several jobs: their kind when they share it ('NPUs'), 'cards'
    when they are of more than one kind, 'GPUs' for none."""
    kinds = set(words)
    if len(kinds) > 1:
        return "cards"
    return kinds.pop() if kinds else "GPUs"


def card_hours_text(hours: float, cards: str = "GPUs") -> str:
    """Card-hours in the cards' own word: '5.00 NPU-hours' for an Ascend job, '12.5 GPU-hours',
    'card-hours' for mixed kinds (`cards` as `card_kind_word` or `cards_word` say them; the
    number as `gpu_hours_text` writes it)."""
    text = gpu_hours_text(hours)
    return text.replace("GPU-hours", f"{cards.removesuffix('s')}-hours")
