"""Hostile submissions generated from the submission policy, for the authorization matrix.

Nothing here lists a forbidden field by hand. The cases come from two sources, both read
through `koordweb.manifests.policy`:

- a PodGroup and a Pod as a cluster dump holds them (`corpus/dumps/pod_and_podgroup.yaml`):
  every field the policy refuses there (API-server metadata, scheduler results, status,
  Koordinator's reserved labels and annotations) is grafted, alone, onto a valid submission;
- the whitelist itself: every mapping in it gets a key it does not list, every label and
  annotation rule a reserved key it does not allow, and every `Checked` field the value a
  tenant may not write (`CHECKED_HOSTILE`, which must name every Checked rule).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from koordweb.manifests import policy

DUMP = Path(__file__).resolve().parent / "corpus" / "dumps" / "pod_and_podgroup.yaml"
UNLISTED_KEY = "unlistedByPolicy"
UNLISTED_RESERVED_KEY = "example.koordinator.sh/unlisted"
# The value a tenant may not write into each Checked field, with the priority class it uses.
CHECKED_HOSTILE: dict[policy.Checked, tuple[str, str]] = {
    policy.SCHEDULER_NAME: ("default-scheduler", "koord-batch"),
    policy.PREEMPTION_POLICY: ("PreemptLowerPriority", "koord-free"),
}


@dataclass(frozen=True)
class HostileCase:
    kind: str  # the document the field is grafted onto: Pod or PodGroup
    path: str  # how the answer must name the field
    keys: tuple[str | int, ...]
    value: Any
    priority_class: str = "koord-batch"

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.path}"


def valid_documents(quota: str, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    """A submission the policy accepts: a PodGroup and its pod, in the tenant's namespace."""
    return {
        "PodGroup": {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "labels": {}, "annotations": {}},
            "spec": {"minMember": 1},
        },
        "Pod": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-0",
                "namespace": namespace,
                "labels": {
                    "pod-group.scheduling.sigs.k8s.io": name,
                    "quota.scheduling.koordinator.sh/name": quota,
                },
                "annotations": {},
            },
            "spec": {
                "priorityClassName": "koord-batch",
                "containers": [
                    {"name": "main", "image": "trainer", "resources": {"requests": {"cpu": "1"}}}
                ],
            },
        },
    }


def graft(document: dict[str, Any], keys: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A copy of `document` with `value` at `keys` (missing mappings and list items made)."""
    grafted = copy.deepcopy(document)
    holder: Any = grafted
    for key, following in zip(keys, (*keys[1:], None), strict=True):
        if following is None:
            holder[key] = copy.deepcopy(value)
            break
        if isinstance(key, int):
            while len(holder) <= key:
                holder.append({})
            holder = holder[key]
            continue
        if not isinstance(holder.get(key), dict | list):
            holder[key] = [] if isinstance(following, int) else {}
        holder = holder[key]
    return grafted


def _from_dump() -> list[HostileCase]:
    cases = []
    for document in yaml.safe_load_all(DUMP.read_text()):
        for refusal in policy.refused_fields(document):
            value = document
            for key in refusal.keys:
                value = value[key]
            cases.append(HostileCase(document["kind"], refusal.path, refusal.keys, value))
    return cases


def _from_whitelist(kind: str, allowed: Any, keys: tuple[str | int, ...]) -> list[HostileCase]:
    cases: list[HostileCase] = []
    if isinstance(allowed, policy.Checked):
        value, priority_class = CHECKED_HOSTILE[allowed]
        cases.append(HostileCase(kind, _path(keys), keys, value, priority_class))
    elif isinstance(allowed, policy.Keys):
        key = (*keys, UNLISTED_RESERVED_KEY)
        cases.append(HostileCase(kind, _path(key), key, "x"))
    elif isinstance(allowed, list):
        cases.extend(_from_whitelist(kind, allowed[0], (*keys, 0)))
    elif isinstance(allowed, dict):
        key = (*keys, UNLISTED_KEY)
        cases.append(HostileCase(kind, _path(key), key, "x"))
        for name, child in allowed.items():
            cases.extend(_from_whitelist(kind, child, (*keys, name)))
    return cases


def _path(keys: tuple[str | int, ...]) -> str:
    return policy.path_text(keys)


def hostile_cases() -> list[HostileCase]:
    """Every forbidden-field submission, from the dump and from the whitelist, no duplicates."""
    cases = _from_dump()
    for kind, whitelist in policy.WHITELIST.items():
        cases.extend(_from_whitelist(kind, whitelist, ()))
    unique = {case.id: case for case in cases}
    return list(unique.values())


def refused_json_labels() -> dict[str, str]:
    """The dump's pod labels the policy refuses: the JSON body's `labels` must refuse them too."""
    labels: dict[str, str] = {}
    for document in yaml.safe_load_all(DUMP.read_text()):
        labels.update((document.get("metadata") or {}).get("labels") or {})
    labels[UNLISTED_RESERVED_KEY] = "x"
    return {key: value for key, value in labels.items() if not policy.POD_LABELS.allows(key)}
