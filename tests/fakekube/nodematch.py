"""Whether a pod may run on a node by its labels and taints, as the kubelet re-checks at admission.

`required_affinity_matches`: the pod's `nodeSelector` (every label equal) and its required node
affinity (any term whose expressions and fields all match; In, NotIn, Exists, DoesNotExist, Gt,
Lt). `untolerated_no_execute`: a NoExecute taint no toleration of the pod covers (the only taint
effect the kubelet looks at).
"""

from __future__ import annotations

from typing import Any

from tests.fakekube.store import Obj, meta


def _requirement(value: str | None, operator: str, values: list[str]) -> bool:
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _term_matches(term: dict[str, Any], labels: dict[str, str], name: str) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    for expr in expressions:
        values = [str(v) for v in expr.get("values") or []]
        if not _requirement(labels.get(expr.get("key", "")), expr.get("operator", ""), values):
            return False
    for expr in fields:
        value = name if expr.get("key") == "metadata.name" else None
        values = [str(v) for v in expr.get("values") or []]
        if not _requirement(value, expr.get("operator", ""), values):
            return False
    return True


def required_affinity_matches(pod: Obj, node: Obj) -> bool:
    spec = pod.get("spec") or {}
    labels = meta(node).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms is None:
        return True
    return any(_term_matches(term, labels, meta(node).get("name", "")) for term in terms)


def _tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_no_execute(pod: Obj, node: Obj) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") != "NoExecute":
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return True
    return False
