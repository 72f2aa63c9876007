"""Where a pod may go, by kube-scheduler's Filter rules, written from their definitions:
TaintToleration, NodeUnschedulable, and NodeAffinity with the nodeSelector.

- A toleration tolerates a taint when its effect is empty or equal, its key is empty or equal,
  and, operator Exists, always; operator Equal (or empty), when the values are equal. So Exists
  with an empty key tolerates every taint.
- TaintToleration: every NoSchedule and NoExecute taint of the node must be tolerated;
  PreferNoSchedule taints only score.
- NodeUnschedulable: a cordoned node takes only pods tolerating the taint
  `node.kubernetes.io/unschedulable` with effect NoSchedule (the one the node lifecycle controller
  puts there), key and effect as above.
- NodeAffinity: every nodeSelector entry is a label of the node with that value, and, when the
  pod has required terms, at least one term matches: a term matches when all its expressions do,
  and a term without expressions matches nothing. In: the label is one of the values; NotIn: the
  label is missing or none of them; Exists / DoesNotExist; Gt / Lt: the label and the one value
  are base-10 64-bit integers and compare so. A malformed expression (In or NotIn without values,
  Exists or DoesNotExist with values, Gt or Lt without exactly one integer value) makes its term
  match nothing, as kube-scheduler's parse error does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from scheduler import vocabulary
from scheduler.model import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    Taint,
    Toleration,
)
from scheduler.oracle.view import RoundView
from scheduler.oracle.violation import (
    NODE_AFFINITY,
    NODE_UNSCHEDULABLE,
    TAINT_TOLERATION,
    Violation,
)

# The cordon's taint key. The vocabulary does not declare it yet (no module may spell it but the
# vocabulary): until it does, only a toleration that matches every key tolerates a cordon, which
# is stricter than kube-scheduler for a pod tolerating exactly that key.
UNSCHEDULABLE_TAINT_KEY: str | None = getattr(vocabulary, "TAINT_NODE_UNSCHEDULABLE", None)
_INT64 = re.compile(r"[+-]?[0-9]+\Z")
_FILTERING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return toleration.value == taint.value
    return False


def untolerated_taint(pod: PodInfo, node: NodeInfo) -> Taint | None:
    """The first NoSchedule/NoExecute taint of `node` that `pod` does not tolerate."""
    for taint in node.taints:
        if taint.effect not in _FILTERING_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in pod.tolerations):
            return taint
    return None


def tolerates_cordon(pod: PodInfo) -> bool:
    if UNSCHEDULABLE_TAINT_KEY is None:
        return any(
            not t.key and t.operator == "Exists" and t.effect in ("", "NoSchedule")
            for t in pod.tolerations
        )
    cordon = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
    return any(tolerates(t, cordon) for t in pod.tolerations)


def _int64(text: str) -> int | None:
    if not _INT64.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool | None:
    """Whether the node's labels meet one expression; None when the expression is malformed."""
    op, values = req.operator, req.values
    present = req.key in labels
    if op in ("In", "NotIn"):
        if not values:
            return None
        inside = present and labels[req.key] in values
        return inside if op == "In" else not inside
    if op in ("Exists", "DoesNotExist"):
        if values:
            return None
        return present if op == "Exists" else not present
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return None
        bound = _int64(values[0])
        if bound is None:
            return None
        have = _int64(labels[req.key]) if present else None
        if have is None:
            return False
        return have > bound if op == "Gt" else have < bound
    return None


def term_matches(
    term: NodeSelectorTerm, labels: Mapping[str, str], fields: Mapping[str, str] | None = None
) -> bool:
    """A term's expressions over the node's labels and its fields over the node's fields (the
    API server allows only `metadata.name`), all ANDed; a term with neither matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    answers = [requirement_matches(req, labels) for req in term.match_expressions]
    answers += [requirement_matches(req, fields or {}) for req in term.match_fields]
    return None not in answers and all(answers)


def affinity_matches(pod: PodInfo, node: NodeInfo) -> bool:
    labels = node.labels
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if not pod.required_affinity:
        return True
    fields = {vocabulary.NODE_NAME_FIELD: node.name}
    return any(term_matches(term, labels, fields) for term in pod.required_affinity)


def check_taints(view: RoundView) -> list[Violation]:
    found = []
    for name, pods in view.placed.items():
        node = view.nodes.get(name)
        if node is None:
            continue
        for pod in pods:
            taint = untolerated_taint(pod, node)
            if taint is not None:
                found.append(
                    Violation(
                        TAINT_TOLERATION,
                        pod.job_id,
                        pod.key,
                        name,
                        f"{pod.key} placed on {name}, whose taint "
                        f"{taint.key}={taint.value}:{taint.effect} it does not tolerate",
                    )
                )
    return found


def check_unschedulable(view: RoundView) -> list[Violation]:
    found = []
    for name, pods in view.placed.items():
        node = view.nodes.get(name)
        if node is None or not node.unschedulable:
            continue
        for pod in pods:
            if not tolerates_cordon(pod):
                found.append(
                    Violation(
                        NODE_UNSCHEDULABLE,
                        pod.job_id,
                        pod.key,
                        name,
                        f"{pod.key} placed on {name}, which is cordoned, "
                        "and it does not tolerate the cordon",
                    )
                )
    return found


def check_affinity(view: RoundView) -> list[Violation]:
    found = []
    for name, pods in view.placed.items():
        node = view.nodes.get(name)
        if node is None:
            continue
        for pod in pods:
            if not affinity_matches(pod, node):
                found.append(
                    Violation(
                        NODE_AFFINITY,
                        pod.job_id,
                        pod.key,
                        name,
                        f"{pod.key} placed on {name}, whose labels do not meet its "
                        "nodeSelector or required node affinity",
                    )
                )
    return found
