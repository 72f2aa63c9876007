"""The submission policy: the whitelist of what a tenant's Pod or PodGroup may carry.

A tenant describes a job: its names, labels and own annotations, resource requests, node
selection, tolerations, node affinity, priority class, gang and topology settings. Everything else
about a pod belongs to someone else: the scheduler (`spec.nodeName`, the
`scheduling.koordinator.sh/device-allocated` annotation), the API server (`metadata.uid`,
`creationTimestamp`, `resourceVersion`), the kubelet (`status`) or the cluster's administrators
(preemption protection labels, a priority set directly). A submission carrying any of them is
refused with the field's path, never silently trimmed, so the tenant learns what was not taken.

`WHITELIST` holds, per kind, the whitelist as a tree: a dict lists the keys a mapping may hold,
a one-element list the shape of every item, `FREE` a value kept whole, a `Checked` value one the
jobs service compares with the cluster (the scheduler name, the preemption policy), and `Keys`
the rule for label and annotation keys. The JSON submission applies the label rule to `labels`.

Admin imports of a cluster dump (the import page, `manage.py import_manifests`) do not pass
through here: they keep every field a dump holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordweb.manifests.objects import POD, POD_GROUP
from scheduler.vocabulary import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_GPU_PARTITION_SPEC,
    ANNOTATION_JOINT_ALLOCATE,
    APP_LABEL_PREFIX,
    DURATION_ANNOTATION,
    GANG_ANNOTATIONS,
    LABEL_QOS_CLASS,
    LIGHTWEIGHT_GANG_MIN_AVAILABLE,
    LIGHTWEIGHT_GANG_NAME,
    POD_GROUP_LABELS,
    QUOTA_NAME,
    RESERVED_DOMAINS,
)


@dataclass(frozen=True)
class Free:
    """Any value, kept whole (a command line, an affinity, a toleration list)."""


@dataclass(frozen=True)
class Checked:
    """A value a tenant may write only as the cluster has it; `rule` says which."""

    rule: str


def key_domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def is_reserved(key: str) -> bool:
    """Does a label or annotation key sit in a domain that tools own, not users?"""
    domain = key_domain(key)
    return any(domain == owner or domain.endswith("." + owner) for owner in RESERVED_DOMAINS)


@dataclass(frozen=True)
class Keys:
    """Label or annotation keys: a tenant's own keys, plus the reserved ones listed here."""

    allowed: frozenset[str]
    allowed_prefixes: tuple[str, ...] = ()

    def allows(self, key: str) -> bool:
        return not is_reserved(key) or key in self.allowed or key.startswith(self.allowed_prefixes)


FREE = Free()
SCHEDULER_NAME = Checked("the cluster's scheduler")
PREEMPTION_POLICY = Checked("the priority class's preemption policy")

# Labels a tenant sets: the quota (checked against membership), the PodGroup a pod joins, its
# QoS class and Kubernetes' recommended application labels.
POD_LABELS = Keys(
    allowed=frozenset(
        {
            QUOTA_NAME,
            *POD_GROUP_LABELS,
            LIGHTWEIGHT_GANG_NAME,
            LIGHTWEIGHT_GANG_MIN_AVAILABLE,
            LABEL_QOS_CLASS,
        }
    ),
    allowed_prefixes=(APP_LABEL_PREFIX,),
)
# Annotations a tenant sets: gang and network-topology settings, device requests (joint
# allocation, GPU partition, allocation hint) and the simulated run time. Koordinator's
# results (`device-allocated`, `resource-status`, `reservation-allocated`, ...) are not here.
POD_ANNOTATIONS = Keys(
    allowed=frozenset(
        {
            *GANG_ANNOTATIONS,
            DURATION_ANNOTATION,
            ANNOTATION_JOINT_ALLOCATE,
            ANNOTATION_GPU_PARTITION_SPEC,
            ANNOTATION_DEVICE_ALLOCATE_HINT,
        }
    )
)

METADATA: dict[str, Any] = {
    "name": FREE,
    "namespace": FREE,
    "labels": POD_LABELS,
    "annotations": POD_ANNOTATIONS,
}
CONTAINER: dict[str, Any] = {
    "name": FREE,
    "image": FREE,
    "imagePullPolicy": FREE,
    "command": FREE,
    "args": FREE,
    "workingDir": FREE,
    "env": FREE,
    "envFrom": FREE,
    "ports": FREE,
    "volumeMounts": FREE,
    "resources": {"requests": FREE, "limits": FREE},
}
POD_SPEC: dict[str, Any] = {
    "containers": [CONTAINER],
    "initContainers": [CONTAINER],
    "nodeSelector": FREE,
    # Node affinity only: the engine places by node labels and has no inter-pod affinity, so a
    # podAffinity or podAntiAffinity would be ignored silently; it is refused instead.
    "affinity": {"nodeAffinity": FREE},
    "tolerations": FREE,
    "priorityClassName": FREE,
    "schedulerName": SCHEDULER_NAME,
    "preemptionPolicy": PREEMPTION_POLICY,
    "restartPolicy": FREE,
    "terminationGracePeriodSeconds": FREE,
    "volumes": FREE,
    "imagePullSecrets": FREE,
}
WHITELIST: dict[str, dict[str, Any]] = {
    POD: {"apiVersion": FREE, "kind": FREE, "metadata": METADATA, "spec": POD_SPEC},
    POD_GROUP: {
        "apiVersion": FREE,
        "kind": FREE,
        "metadata": METADATA,
        "spec": {"minMember": FREE, "scheduleTimeoutSeconds": FREE, "minResources": FREE},
    },
}

# Why a field is refused, by the first part of its path; the fallback covers the rest.
_OWNERS = (
    ("status", "the cluster writes an object's status"),
    ("spec.nodeName", "the scheduler sets it when it binds the pod"),
    ("spec.priority", "a priority comes from priorityClassName"),
    (
        "spec.affinity.podAffinity",
        "koordweb's scheduler does not place by inter-pod affinity; it would be ignored",
    ),
    (
        "spec.affinity.podAntiAffinity",
        "koordweb's scheduler does not place by inter-pod anti-affinity; it would be ignored",
    ),
    ("metadata.annotations", "the key is reserved for the scheduler and the cluster's admins"),
    ("metadata.labels", "the key is reserved for the scheduler and the cluster's admins"),
    ("metadata", "the API server sets it"),
)


def why_refused(path: str) -> str:
    for prefix, reason in _OWNERS:
        if path == prefix or path.startswith(prefix + "."):
            return reason
    return "a submission may not set it"


@dataclass(frozen=True)
class Refusal:
    """One field a tenant may not set: its path in the document, as text and as keys, and why."""

    path: str
    reason: str
    keys: tuple[str | int, ...] = ()

    @property
    def message(self) -> str:
        if self.keys == ("kind",):
            return f"kind: {self.reason}"
        return f"{self.path}: a tenant may not set this field ({self.reason})"


def refused_fields(document: Mapping[str, Any]) -> list[Refusal]:
    """Every field of a Pod or PodGroup document outside the whitelist (other kinds: all).

    A refused mapping is reported leaf by leaf (`status.nominatedNodeName`, `status.startTime`),
    so the answer names each field that was not taken.
    """
    whitelist = WHITELIST.get(str(document.get("kind")))
    if whitelist is None:
        return [Refusal("kind", "a submission holds only PodGroups and Pods", ("kind",))]
    refusals: list[Refusal] = []
    _walk(document, whitelist, (), refusals)
    return refusals


def path_text(keys: tuple[str | int, ...]) -> str:
    """("spec", "containers", 0, "name") -> "spec.containers[0].name"."""
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def _refuse(value: Any, keys: tuple[str | int, ...], refusals: list[Refusal]) -> None:
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            _refuse(item, (*keys, str(key)), refusals)
        return
    path = path_text(keys)
    refusals.append(Refusal(path, why_refused(path), keys))


def _walk(value: Any, allowed: Any, keys: tuple[str | int, ...], refusals: list[Refusal]) -> None:
    if isinstance(allowed, Free | Checked) or value is None:
        return
    if isinstance(allowed, Keys):
        if isinstance(value, Mapping):
            for key in value:
                if isinstance(key, str) and not allowed.allows(key):
                    path = path_text((*keys, key))
                    refusals.append(Refusal(path, why_refused(path), (*keys, key)))
        return
    if isinstance(allowed, list):
        if isinstance(value, list):
            for index, item in enumerate(value):
                _walk(item, allowed[0], (*keys, index), refusals)
        return
    if isinstance(allowed, dict) and isinstance(value, Mapping):
        for key, item in value.items():
            if key in allowed:
                _walk(item, allowed[key], (*keys, str(key)), refusals)
            else:
                _refuse(item, (*keys, str(key)), refusals)
    # A value of the wrong type is left to the parser, which names it.


# What a JSON submission's own fields decide (its quota, its gang): its labels may not say them
# too, or its pods would join a PodGroup the submitter names (another team's, say).
JOB_OWNED_LABELS = frozenset(
    {QUOTA_NAME, *POD_GROUP_LABELS, LIGHTWEIGHT_GANG_NAME, LIGHTWEIGHT_GANG_MIN_AVAILABLE}
)


def refused_labels(labels: Mapping[str, Any], *, path: str = "labels") -> list[Refusal]:
    """The JSON submission's labels outside the pod label rule, and those its own fields set."""
    refused = []
    for key in labels:
        if str(key) in JOB_OWNED_LABELS:
            why = "set by koordweb from the job's quota and gang, not by labels"
            refused.append(Refusal(f"{path}.{key}", why, (path, str(key))))
        elif not POD_LABELS.allows(str(key)):
            refused.append(
                Refusal(f"{path}.{key}", why_refused("metadata.labels"), (path, str(key)))
            )
    return refused
