"""Pod templates: what makes two pods interchangeable for node fit, so the framework and the
slot-limit Filters answer once per template instead of once per pod.

A Filter plugin declares the pod fields its verdict reads (`pod_fields`); the profile's template
key covers the union of those (`template_fields`), and `CycleState.template` keys each pod by it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.model import PodInfo
from scheduler.vocabulary import SCHEDULING_ANNOTATION_PREFIX

# What a pod's spec holds that a Filter may read: a Filter plugin declares the fields its
# verdict reads in `pod_fields` (a name, or "name:prefix" for the keys of a mapping field that
# start with the prefix); one that declares nothing is taken to read all of these.
SPEC_FIELDS: tuple[str, ...] = (
    "requests",
    "limits",
    "node_selector",
    "required_affinity",
    "tolerations",
    "labels",
    "annotations",
    "priority",
    "preemption_policy",
    "quota",
    "daemonset",
)
# The in-tree Filters' fields (NodeResourcesFit, NodeUnschedulable, NodeAffinity,
# TaintToleration, DeviceShare): the key of a profile of these alone.
DEFAULT_TEMPLATE_FIELDS: tuple[str, ...] = (
    "requests",
    "node_selector",
    "required_affinity",
    "tolerations",
    "annotations:" + SCHEDULING_ANNOTATION_PREFIX,
)


def template_key(pod: PodInfo, fields: Sequence[str] = DEFAULT_TEMPLATE_FIELDS) -> tuple[Any, ...]:
    """What makes two pods interchangeable for node fit: the pod fields the profile's Filters
    read (`fields`, see `SPEC_FIELDS`): by default requests, node constraints and the
    Koordinator scheduling annotations (a joint GPU+RDMA allocation fits fewer nodes)."""
    return tuple(_field_value(pod, field) for field in fields)


def _field_value(pod: PodInfo, field: str) -> Any:
    name, _, prefix = field.partition(":")
    value = getattr(pod, name)
    if isinstance(value, Mapping):
        if not value:
            return ()
        if prefix:
            return tuple(sorted((k, v) for k, v in value.items() if k.startswith(prefix)))
        return tuple(sorted(value.items()))
    return value


def template_fields(declared: Sequence[Sequence[str] | None]) -> tuple[str, ...]:
    """The fields a template key covers for Filters that declared `declared` (None: a Filter
    that declared nothing, taken to read every spec field), in a fixed order."""
    wanted: set[str] = set()
    for fields in declared:
        wanted.update(SPEC_FIELDS if fields is None else fields)
    # a whole mapping field covers its prefixed parts
    wanted = {f for f in wanted if f.partition(":")[0] == f or f.partition(":")[0] not in wanted}
    if set(DEFAULT_TEMPLATE_FIELDS) >= wanted:  # the default key, in its own order
        return tuple(f for f in DEFAULT_TEMPLATE_FIELDS if f in wanted)
    return tuple(sorted(wanted))
