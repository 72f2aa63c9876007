"""Node constraint plugins. Extension point: Filter (node masks).

- `NodeUnschedulable`: cordoned nodes take no new pods, but for a pod tolerating the cordon's
  taint (`node.kubernetes.io/unschedulable:NoSchedule`), as kube-scheduler lets it.
- `NodeAffinity`: `spec.nodeSelector` and required node affinity: matchExpressions on labels
  (In, NotIn, Exists, DoesNotExist, Gt, Lt) and matchFields on the node's name (In, NotIn);
  terms ORed, a term's expressions and fields ANDed, an empty term matching nothing.
- `TaintToleration`: NoSchedule and NoExecute taints must be tolerated (PreferNoSchedule is soft).

Each verdict is a boolean array over all nodes, computed once per pod template and cached by the
cycle state, so a job with thousands of identical pods evaluates the nodes once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from scheduler.causes import NODE_AFFINITY, NODE_CORDONED, TAINT_UNTOLERATED
from scheduler.framework import Handle, NodeMask
from scheduler.model import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    Taint,
    Toleration,
)
from scheduler.state import CycleState
from scheduler.vocabulary import NODE_NAME_FIELD, TAINT_NODE_UNSCHEDULABLE

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
CORDON = Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TAINT = "node(s) had untolerated taint"


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    # Gt / Lt compare integers; a missing or non-integer label never matches.
    try:
        have, want = int(value or ""), int(req.values[0])
    except (ValueError, IndexError):
        return False
    return have > want if op == "Gt" else have < want


def term_matches(term: NodeSelectorTerm, node: NodeInfo) -> bool:
    """All of a term's expressions hold on the node's labels and all its fields on the node
    (`metadata.name`, the one field key); a term with neither matches nothing, as Kubernetes'
    `nodeaffinity.NewNodeSelector` drops it."""
    if not term.match_expressions and not term.match_fields:
        return False
    fields = {NODE_NAME_FIELD: node.name}
    return all(requirement_matches(r, node.labels) for r in term.match_expressions) and all(
        requirement_matches(r, fields) for r in term.match_fields
    )


def node_matches(pod: PodInfo, node: NodeInfo) -> bool:
    labels = node.labels
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if not pod.required_affinity:
        return True
    return any(term_matches(term, node) for term in pod.required_affinity)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == taint.key
    return toleration.key == taint.key and toleration.value == taint.value


def taints_tolerated(pod: PodInfo, node: NodeInfo) -> bool:
    return all(
        taint.effect == "PreferNoSchedule" or any(tolerates(t, taint) for t in pod.tolerations)
        for taint in node.taints
    )


class NodeUnschedulable:
    name = "NodeUnschedulable"
    extension_points = frozenset({"Filter"})
    pod_fields = ("tolerations",)  # what its verdict reads of a pod (`state.template_fields`)

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        pass

    def node_mask(self, state: CycleState, pod: PodInfo) -> NodeMask | None:
        # kube-scheduler's NodeUnschedulable: a pod that tolerates the cordon's taint
        # (node.kubernetes.io/unschedulable:NoSchedule, what `kubectl cordon` means) may go there
        if any(tolerates(t, CORDON) for t in pod.tolerations):
            return None
        allowed = np.array([not n.unschedulable for n in state.nodes], dtype=np.bool_)
        if allowed.all():
            return None
        return NodeMask(allowed, REASON_UNSCHEDULABLE, code=NODE_CORDONED)


class NodeAffinity:
    name = "NodeAffinity"
    extension_points = frozenset({"Filter"})
    pod_fields = ("node_selector", "required_affinity")

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        pass

    def node_mask(self, state: CycleState, pod: PodInfo) -> NodeMask | None:
        if not pod.node_selector and not pod.required_affinity:
            return None
        allowed = np.array([node_matches(pod, n) for n in state.nodes], dtype=np.bool_)
        return NodeMask(allowed, REASON_AFFINITY, code=NODE_AFFINITY)


class TaintToleration:
    name = "TaintToleration"
    extension_points = frozenset({"Filter"})
    pod_fields = ("tolerations",)

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        pass

    def node_mask(self, state: CycleState, pod: PodInfo) -> NodeMask | None:
        if not any(n.taints for n in state.nodes):
            return None
        allowed = np.array([taints_tolerated(pod, n) for n in state.nodes], dtype=np.bool_)
        return NodeMask(allowed, REASON_TAINT, code=TAINT_UNTOLERATED)
