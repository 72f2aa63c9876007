"""Parsers for workloads: Pod, PodGroup, ElasticQuota and PodDisruptionBudget documents ->
validated `ParsedObject`s (no database access). Jobs are assembled from them in `jobs.py`."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from koordweb.kubenames import container_resource_errors, quota_name_errors
from koordweb.limits import DURATION, GANG_MODES, GATHER_STRATEGIES, job_name_errors
from koordweb.manifests.errors import ManifestError
from koordweb.manifests.fields import MAX_INT32, At, pop_keys, read_metadata
from koordweb.manifests.objects import PDB, POD, POD_GROUP, QUOTA, ParsedObject
from koordweb.manifests.parse_cluster import PREEMPTION_POLICIES
from scheduler.api import go_duration_seconds
from scheduler.vocabulary import (
    DAEMONSET_KIND,
    DEFAULT_WAITING_SECONDS,
    DURATION_ANNOTATION,
    GANG_ANNOTATIONS,
    GANG_GROUPS,
    GANG_MATCH_POLICY,
    GANG_MIN_AVAILABLE,
    GANG_MODE,
    GANG_NAME,
    GANG_TOPOLOGY_INDEX,
    GANG_TOPOLOGY_SPEC,
    GANG_TOTAL_NUMBER,
    GANG_WAITING_TIME,
    LIGHTWEIGHT_GANG_MATCH_POLICY,
    LIGHTWEIGHT_GANG_MIN_AVAILABLE,
    LIGHTWEIGHT_GANG_NAME,
    MATCH_ONCE_SATISFIED,
    MATCH_POLICIES,
    POD_GROUP_LABELS,
    QUOTA_ALLOW_LENT,
    QUOTA_IS_PARENT,
    QUOTA_NAME,
    QUOTA_PARENT,
    QUOTA_SHARED_WEIGHT,
    ROOT_QUOTA,
)

POD_PHASES = {"Pending", "Running", "Succeeded", "Failed"}
_INT_OR_PERCENT_RE = re.compile(r"\d{1,9}%?")


def _annotation(meta_annotations: dict[str, str], index: int, key: str) -> At:
    return At(index, meta_annotations.get(key), f"metadata.annotations.{key}")


def read_topology_spec(at: At) -> dict[str, Any]:
    """`{"gatherStrategy": [{"layer": ..., "strategy": MustGather|PreferGather}, ...]}`."""
    spec = at.json_text({})
    if not isinstance(spec, dict):
        at.fail("must be a JSON object with gatherStrategy")
    strategies = spec.get("gatherStrategy", [])
    if not isinstance(strategies, list):
        at.fail("gatherStrategy must be a list")
    for rule in strategies:
        if not isinstance(rule, dict) or not isinstance(rule.get("layer"), str):
            at.fail(f"each gatherStrategy rule needs a layer name, got {rule!r}")
        if rule.get("strategy") not in GATHER_STRATEGIES:
            at.fail(
                f"strategy must be one of {sorted(GATHER_STRATEGIES)}, got {rule.get('strategy')!r}"
            )
        multiple = rule.get("podCountMultiple", 1)
        if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
            at.fail(f"podCountMultiple must be a positive integer, got {multiple!r}")
    return spec


def read_gang_groups(at: At) -> list[str]:
    """`/groups`: a JSON list of "namespace/name" gang ids placed together."""
    groups = at.json_text([])
    if not isinstance(groups, list) or not all(
        isinstance(g, str) and re.fullmatch(r"[^/\s]+/[^/\s]+", g) for g in groups
    ):
        at.fail(f'must be a JSON list of "namespace/name" gang ids, got {groups!r}')
    return sorted(set(groups))


def _read_duration(annotations: dict[str, str], index: int) -> int | None:
    """The simulated run time, within the bound every door holds it to (`limits.DURATION`)."""
    at = _annotation(annotations, index, DURATION_ANNOTATION)
    return at.integer(minimum=DURATION.minimum, maximum=DURATION.maximum) if at.present() else None


def _container_resources(containers: Iterable[At]) -> list[tuple[dict[str, int], dict[str, int]]]:
    result = []
    for container in containers:
        container.child("name").string(required=True, max_length=63)
        resources = container.child("resources")
        limits = resources.child("limits").resources()
        # As in Kubernetes, a limit without a request is also the request.
        requests = {**limits, **resources.child("requests").resources()}
        for reason in container_resource_errors(requests):
            resources.fail(reason, "requests")
        result.append((requests, limits))
    return result


def pod_resources(spec: At) -> tuple[dict[str, int], dict[str, int]]:
    """Effective pod requests and limits: the sum over containers, at least each init container."""
    containers = spec.child("containers").items()
    if not containers:
        spec.fail("a pod needs at least one container", "containers")
    totals: list[dict[str, int]] = [{}, {}]
    for pair in _container_resources(containers):
        for total, amounts in zip(totals, pair, strict=True):
            for name, amount in amounts.items():
                total[name] = total.get(name, 0) + amount
    for pair in _container_resources(spec.child("initContainers").items()):
        for total, amounts in zip(totals, pair, strict=True):
            for name, amount in amounts.items():
                total[name] = max(total.get(name, 0), amount)
    return totals[0], totals[1]


def _read_gang(
    annotations: dict[str, str], index: int, warnings: list[str], label_minimum: At
) -> dict[str, Any] | None:
    """Gang settings of an annotation gang, from the pod's gang annotations, as Koordinator's
    `tryInitByPodConfig` reads them: min-available first (the lightweight label's before the
    annotation's, `GetGangMinNumFromPod`), the rest fall back. A pod whose min-available cannot
    be read initialises nothing (None, with a warning): its gang takes the settings of a member
    that can. `0` (or less) needs no other member: each pod binds alone, as a NonStrict gang
    of one (Koordinator's PreEnqueue and Permit find a minimum of 0 always met)."""
    minimum = (
        label_minimum
        if label_minimum.string()
        else _annotation(annotations, index, GANG_MIN_AVAILABLE)
    )
    text = minimum.string(max_length=64).strip()
    try:
        min_available = int(text)
    except ValueError:
        shown = repr(text[:64]) if text else "missing"
        warnings.append(
            f"document {index}: {minimum.path}: {shown} is not a number Koordinator reads: "
            "this pod does not set up its gang (a member that has one does)"
        )
        return None
    if min_available > MAX_INT32:
        minimum.fail(f"is out of range (at most {MAX_INT32})")
    alone = min_available < 1
    if alone:
        warnings.append(
            f"document {index}: {minimum.path}: {text!r} needs no other member: Koordinator "
            "binds each pod of the gang alone (koordweb: NonStrict, min-available 1)"
        )
        min_available = 1
    wait = _annotation(annotations, index, GANG_WAITING_TIME).string(max_length=64)
    settings = {
        "min_available": min_available,
        **_gang_annotations(annotations, index, min_available, warnings),
        "waiting_time_seconds": _waiting_seconds(wait, index, warnings),
    }
    if alone:
        settings["mode"] = "NonStrict"
    policy = match_policy(annotations, index, warnings)
    if policy:
        # koordweb has no column for it: the job keeps it as its own annotation.
        settings["annotations"] = {GANG_MATCH_POLICY: policy}
    return settings


def match_policy(annotations: dict[str, str], index: int, warnings: list[str]) -> str:
    """The gang's match policy as Koordinator's GetGangMatchPolicy reads it (the gang
    annotation, then the lightweight one); one it does not know is once-satisfied, with a
    warning; "" when neither is set (once-satisfied, the default)."""
    key = GANG_MATCH_POLICY if annotations.get(GANG_MATCH_POLICY) else LIGHTWEIGHT_GANG_MATCH_POLICY
    value = annotations.get(key, "")
    if value and value not in MATCH_POLICIES:
        warnings.append(_fallback(index, key, value, MATCH_ONCE_SATISFIED))
        return MATCH_ONCE_SATISFIED
    return value


def _gang_annotations(
    annotations: dict[str, str], index: int, min_available: int, warnings: list[str]
) -> dict[str, Any]:
    """What a PodGroup and an annotation gang's pods both say in gang annotations (total number,
    mode, groups, topology), read as Koordinator v1.7 does (`tryInitByPodGroup`,
    `tryInitByPodConfig`): a value it cannot use falls back to its default, with a warning,
    rather than refusing the document."""

    def at(key: str) -> At:
        return _annotation(annotations, index, key)

    total_text = at(GANG_TOTAL_NUMBER).string()
    total: int | None = None
    if total_text:
        try:
            total = int(total_text)
        except ValueError:
            warnings.append(_fallback(index, GANG_TOTAL_NUMBER, total_text, "min-available"))
        else:
            if total > MAX_INT32:
                at(GANG_TOTAL_NUMBER).fail(f"is out of range (at most {MAX_INT32})")
            if total != 0 and total < min_available:
                warnings.append(_fallback(index, GANG_TOTAL_NUMBER, total_text, "min-available"))
            if total < min_available:
                total = None  # the job's size decides (at least min-available)
    mode = at(GANG_MODE).string() or "Strict"
    if mode not in GANG_MODES:
        warnings.append(_fallback(index, GANG_MODE, mode, "Strict"))
        mode = "Strict"
    try:
        groups = read_gang_groups(at(GANG_GROUPS))
    except ManifestError as error:
        warnings.append(f"{error}: Koordinator places the gang alone instead")
        groups = []
    try:
        topology = read_topology_spec(at(GANG_TOPOLOGY_SPEC))
    except ManifestError as error:
        warnings.append(f"{error}: Koordinator applies no topology rule instead")
        topology = {}
    return {"total_number": total, "mode": mode, "gang_groups": groups, "topology_spec": topology}


def _waiting_seconds(text: str, index: int, warnings: list[str]) -> int:
    """The gang's waiting time from a Go duration: 0, an unreadable or a negative value is
    Koordinator's default (600 s); a fraction of a second is rounded up (0 would be "never")."""
    if not text:
        return DEFAULT_WAITING_SECONDS
    where = f"document {index}: metadata.annotations.{GANG_WAITING_TIME}: {text!r}"
    seconds = go_duration_seconds(text)
    if seconds is None or seconds < 0:
        warnings.append(
            f"{where} is not a duration Koordinator reads (such as 600s, 10m or 1h30m): it "
            f"takes the default {DEFAULT_WAITING_SECONDS} s instead"
        )
        return DEFAULT_WAITING_SECONDS
    if seconds == 0:
        return DEFAULT_WAITING_SECONDS
    if seconds > MAX_INT32:
        warnings.append(f"{where} is capped at {MAX_INT32:,} s")
        return MAX_INT32
    return max(1, math.ceil(seconds))


def _topology_index(at: At, warnings: list[str]) -> int | None:
    """A pod's network-topology-index as Koordinator's GetPodIndex reads it: a negative one is
    "no index" (the pod is placed after those with one); one it cannot read too, with a warning."""
    text = at.string()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        warnings.append(f"{at.where()}: {text[:64]!r} is not a number: the pod has no index")
        return None
    if value > MAX_INT32:
        at.fail(f"is out of range (at most {MAX_INT32})")
    return value if value >= 0 else None


def _fallback(index: int, key: str, value: str, default: str) -> str:
    return (
        f"document {index}: metadata.annotations.{key}: {value[:64]!r} is not a value "
        f"Koordinator uses: it takes {default} instead"
    )


def _finished_at(status: At) -> Any:
    """When the last container terminated (containerStatuses[].state.terminated.finishedAt)."""
    times = [
        container.child("state").child("terminated").child("finishedAt").timestamp()
        for container in status.child("containerStatuses").items()
    ]
    return max((time for time in times if time is not None), default=None)


def owner_kind(meta: At) -> str:
    """The kind of a pod's owner (`metadata.ownerReferences`): DaemonSet when any reference is
    one (Koordinator's `isDaemonSetPod` looks at every reference), else the controller's, else
    the first's; "" without an owner."""
    kinds: list[str] = []
    controller = ""
    for ref in meta.child("ownerReferences").items():
        kind = ref.child("kind").string(required=True, max_length=63)
        kinds.append(kind)
        if ref.child("controller").boolean() and not controller:
            controller = kind
    if DAEMONSET_KIND in kinds:
        return DAEMONSET_KIND
    return controller or (kinds[0] if kinds else "")


def parse_pod(doc: At) -> ParsedObject:
    meta = read_metadata(doc, namespaced=True)
    spec, status = doc.child("spec"), doc.child("status")
    labels, annotations = dict(meta.labels), dict(meta.annotations)
    requests, limits = pod_resources(spec)
    node_name = spec.child("nodeName").string()
    phase = status.child("phase").string("Pending")
    if phase not in POD_PHASES:
        status.fail(f"must be one of {sorted(POD_PHASES)}, got {phase!r}", "phase")
    if phase == "Running" and not node_name:
        status.fail("a Running pod needs spec.nodeName", "phase")
    policy_at = spec.child("preemptionPolicy")
    if policy_at.present() and policy_at.string() not in PREEMPTION_POLICIES:
        policy_at.fail(f"must be one of {sorted(PREEMPTION_POLICIES)}")
    priority_at = spec.child("priority")
    index_at = _annotation(annotations, doc.index, GANG_TOPOLOGY_INDEX)
    warnings: list[str] = []
    extra: dict[str, Any] = {
        "duration_seconds": _read_duration(annotations, doc.index),
        "warnings": warnings,
    }
    group_labels = pop_keys(labels, *POD_GROUP_LABELS)
    if group_labels:
        label, group = next(iter(group_labels.items()))
        extra["pod_group"] = At(doc.index, group, f"metadata.labels.{label}").string(required=True)
        if GANG_TOPOLOGY_SPEC in annotations:
            # Koordinator reads a PodGroup gang's rule from the PodGroup only.
            warnings.append(
                f"document {doc.index}: pod {meta.namespace}/{meta.name} belongs to PodGroup "
                f"{group}: its own {GANG_TOPOLOGY_SPEC} is not used (Koordinator reads the "
                "PodGroup's)"
            )
    elif labels.get(LIGHTWEIGHT_GANG_NAME) or GANG_NAME in annotations:
        # Koordinator's GetGangNameByPod: the (deprecated) lightweight label, then the annotation.
        if labels.get(LIGHTWEIGHT_GANG_NAME):
            at = At(
                doc.index, labels[LIGHTWEIGHT_GANG_NAME], f"metadata.labels.{LIGHTWEIGHT_GANG_NAME}"
            )
        else:
            at = _annotation(annotations, doc.index, GANG_NAME)
        extra["gang"] = at.string(required=True)
        # The gang's name becomes the job's: held to the job name rule of every other door.
        for reason in job_name_errors(extra["gang"]):
            at.fail(reason)
        minimum = At(
            doc.index,
            labels.get(LIGHTWEIGHT_GANG_MIN_AVAILABLE),
            f"metadata.labels.{LIGHTWEIGHT_GANG_MIN_AVAILABLE}",
        )
        extra["gang_settings"] = _read_gang(annotations, doc.index, warnings, minimum)
    else:
        extra["gang_settings"] = {}
    scheduled = [
        c for c in status.child("conditions").items() if c.child("type").string() == "PodScheduled"
    ]
    bound_at = scheduled[0].child("lastTransitionTime").timestamp() if scheduled else None
    nominated = status.child("nominatedNodeName").string()
    # A preemption marks its nominee PodScheduled=False when it nominates it: that time is when
    # the nomination began (the gang waiting time counts from it).
    nominated_at = bound_at if nominated and not node_name else None
    quota = pop_keys(labels, QUOTA_NAME).get(QUOTA_NAME, "")
    pop_keys(annotations, *GANG_ANNOTATIONS, DURATION_ANNOTATION)
    return ParsedObject(
        doc.index,
        POD,
        meta.namespace,
        meta.name,
        values={
            "uid": meta.uid,
            "requests": requests,
            "limits": limits,
            "node_selector": spec.child("nodeSelector").labels(),
            "affinity": spec.child("affinity").affinity(),
            "tolerations": spec.child("tolerations").tolerations(),
            "labels": labels,
            "annotations": annotations,
            "priority_class_name": spec.child("priorityClassName").string(),
            "phase": phase,
            "topology_index": _topology_index(index_at, warnings),
            "created_at": meta.created_at,
            "bound_at": bound_at if node_name else None,
            "nominated_at": nominated_at,
            "started_at": status.child("startTime").timestamp(),
            "finished_at": _finished_at(status),
            "terminating": meta.deleting,
            "owner_kind": owner_kind(doc.child("metadata")),
        },
        refs={
            "node": node_name,
            "nominated_node": nominated,
            "quota": quota,
        },
        extra={
            **extra,
            "scheduler_name": spec.child("schedulerName").string(max_length=63),
            "priority": (
                priority_at.integer(minimum=-MAX_INT32 - 1, maximum=MAX_INT32)
                if priority_at.present()
                else None
            ),
            "preemption_policy": policy_at.string(),
        },
    )


def parse_pod_group(doc: At, api_version: str) -> ParsedObject:
    """A scheduler-plugins PodGroup (either API group): minMember and scheduleTimeoutSeconds."""
    meta = read_metadata(doc, namespaced=True)
    spec = doc.child("spec")
    annotations = dict(meta.annotations)
    warnings: list[str] = []
    min_available = spec.child("minMember").integer(required=True, minimum=1, maximum=MAX_INT32)
    timeout = spec.child("scheduleTimeoutSeconds")
    waiting = DEFAULT_WAITING_SECONDS
    if timeout.present():
        waiting = timeout.integer(minimum=-MAX_INT32 - 1, maximum=MAX_INT32)
        if waiting <= 0:  # Koordinator's GetWaitTimeDuration: not positive, the default
            warnings.append(
                f"document {doc.index}: spec.scheduleTimeoutSeconds: {waiting} is not positive:"
                f" Koordinator takes the default {DEFAULT_WAITING_SECONDS} s instead"
            )
            waiting = DEFAULT_WAITING_SECONDS
    values = {
        "pod_group_api": api_version,
        "min_available": min_available,
        **_gang_annotations(annotations, doc.index, min_available, warnings),
        "waiting_time_seconds": waiting,
        "duration_seconds": _read_duration(annotations, doc.index),
        "labels": meta.labels,
        "submitted_at": meta.created_at,
    }
    policy = match_policy(annotations, doc.index, warnings)
    pop_keys(
        annotations,
        GANG_GROUPS,
        GANG_TOPOLOGY_SPEC,
        GANG_MODE,
        GANG_TOTAL_NUMBER,
        DURATION_ANNOTATION,
        GANG_MATCH_POLICY,
        LIGHTWEIGHT_GANG_MATCH_POLICY,
    )
    if policy:
        annotations[GANG_MATCH_POLICY] = policy  # read by the snapshot from the job's annotations
    values["annotations"] = annotations
    return ParsedObject(
        doc.index, POD_GROUP, meta.namespace, meta.name, values=values, extra={"warnings": warnings}
    )


def parse_quota(doc: At) -> ParsedObject:
    """An ElasticQuota: min/max, tree labels and the shared-weight annotation."""
    meta = read_metadata(doc, namespaced=True)
    for reason in quota_name_errors(meta.name):
        doc.fail(reason, "metadata.name")
    spec = doc.child("spec")
    labels, annotations = dict(meta.labels), dict(meta.annotations)
    label = {
        key: At(doc.index, labels.get(key), f"metadata.labels.{key}")
        for key in (QUOTA_PARENT, QUOTA_IS_PARENT, QUOTA_ALLOW_LENT)
    }
    weight_at = _annotation(annotations, doc.index, QUOTA_SHARED_WEIGHT)
    weight = None
    if weight_at.present():
        weight = At(doc.index, weight_at.json_text({}), weight_at.path).resources()
    parent = label[QUOTA_PARENT].string()
    minimum, maximum = spec.child("min").resources(), spec.child("max").resources()
    for name, amount in minimum.items():
        if name in maximum and amount > maximum[name]:
            spec.fail(f"min {name} is above max", f"min.{name}")
    pop_keys(labels, QUOTA_PARENT, QUOTA_IS_PARENT, QUOTA_ALLOW_LENT)
    pop_keys(annotations, QUOTA_SHARED_WEIGHT)
    # Koordinator's IsParentQuota and IsAllowLentResource compare the label with "true" and
    # "false" exactly: any other spelling is not a parent, and lends.
    warnings = [
        f'document {doc.index}: {at.path}: {at.value[:64]!r} is neither "true" nor "false": '
        f"Koordinator reads it as {meaning}"
        for at, meaning in (
            (label[QUOTA_IS_PARENT], "not a parent"),
            (label[QUOTA_ALLOW_LENT], "lending its unused resources"),
        )
        if isinstance(at.value, str) and at.value not in ("true", "false")
    ]
    values: dict[str, Any] = {
        "min": minimum,
        "max": maximum,
        "shared_weight": weight,
        "is_parent": label[QUOTA_IS_PARENT].string() == "true",
        "allow_lent": label[QUOTA_ALLOW_LENT].string() != "false",
        "labels": labels,
        "annotations": annotations,
    }
    return ParsedObject(
        doc.index,
        QUOTA,
        meta.namespace,
        meta.name,
        values=values,
        refs={"parent": "" if parent == ROOT_QUOTA else parent},
        extra={"warnings": warnings},
    )


def _int_or_percent(at: At) -> str:
    if at.value is None:
        return ""
    text = (
        str(at.value)
        if isinstance(at.value, int) and not isinstance(at.value, bool)
        else at.string()
    )
    if not _INT_OR_PERCENT_RE.fullmatch(text) or (text.endswith("%") and int(text[:-1]) > 100):
        at.fail(f"must be a non-negative integer or a percentage, got {at.value!r}")
    return text


def parse_pdb(doc: At) -> ParsedObject:
    meta = read_metadata(doc, namespaced=True)
    spec = doc.child("spec")
    min_available = _int_or_percent(spec.child("minAvailable"))
    max_unavailable = _int_or_percent(spec.child("maxUnavailable"))
    if min_available and max_unavailable:
        spec.fail("set minAvailable or maxUnavailable, not both", "maxUnavailable")
    selector = spec.child("selector")
    selector.mapping()
    return ParsedObject(
        doc.index,
        PDB,
        meta.namespace,
        meta.name,
        values={
            "selector": selector.json_value({}),
            "min_available": min_available,
            "max_unavailable": max_unavailable,
        },
    )
