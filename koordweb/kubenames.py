"""What the Kubernetes API server accepts as names, label keys and values, annotation keys and
tolerations (the rules of apimachinery's validation and of the core API's pod validation).

Every door a tenant's text comes through checks it here: the API's job submission and the
manifest reader. A value refused here is one the cluster would refuse when the job's pods are
created: later, with the job already accepted, and only on a real cluster. Each check returns
reasons in plain words, empty when the value is valid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scheduler.vocabulary import NODE_NAME_FIELD

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
NAME_MAX = 63  # a key's name part and a label value
ANNOTATIONS_MAX_BYTES = 256 * 1024  # all of an object's annotations together, keys included
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_NAME_RULE = "letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
# In words, for the forms' and the API's messages.
NAME_CHARACTERS = (
    "lower-case letters, digits, '-' or '.', starting and ending with a letter or digit"
)
LABEL_CHARACTERS = "lower-case letters, digits or '-', starting and ending with a letter or digit"
QUOTA_NAME_RULE = (
    f"must be {NAME_CHARACTERS}, at most {NAME_MAX} characters: pods carry it as the value of "
    "their quota label"
)
_SUBDOMAIN_RULE = f"a DNS subdomain of at most {DNS_SUBDOMAIN_MAX} characters ({NAME_CHARACTERS})"


def is_dns_label(value: str) -> bool:
    """A namespace, or a name that must fit one DNS label."""
    return len(value) <= DNS_LABEL_MAX and DNS_LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: str) -> bool:
    """An object's name (pods, jobs, nodes): dot-separated DNS labels."""
    return len(value) <= DNS_SUBDOMAIN_MAX and DNS_SUBDOMAIN.fullmatch(value) is not None


def name_errors(value: str) -> list[str]:
    """A job's name (its pods are "<name>-<index>"): a DNS subdomain."""
    return [] if is_dns_subdomain(value) else [f"must be {NAME_CHARACTERS}"]


def namespace_errors(value: str) -> list[str]:
    return [] if is_dns_label(value) else [f"must be {LABEL_CHARACTERS}"]


def quota_name_errors(value: str) -> list[str]:
    """A quota's name: an object name that pods also carry as a label value (63 at most)."""
    return [] if len(value) <= NAME_MAX and is_dns_subdomain(value) else [QUOTA_NAME_RULE]


def qualified_name_errors(value: str) -> list[str]:
    """A label or annotation key, a toleration's key: an optional DNS-subdomain prefix and '/',
    then a name of at most 63 characters."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["has more than one '/' (a key is an optional DNS prefix, '/' and a name)"]
    errors = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("has an empty prefix before '/'")
        elif not is_dns_subdomain(prefix):
            errors.append(f"has a prefix that is not {_SUBDOMAIN_RULE}")
    if not name:
        errors.append("has an empty name")
    elif len(name) > NAME_MAX:
        errors.append(f"has a name longer than {NAME_MAX} characters")
    elif not _NAME.fullmatch(name):
        errors.append(f"has a name that is not {_NAME_RULE}")
    return errors


def label_value_errors(value: str) -> list[str]:
    """A label value, a node selector's value, a toleration's value: empty, or a name."""
    if len(value) > NAME_MAX:
        return [f"is longer than {NAME_MAX} characters"]
    if value and not _NAME.fullmatch(value):
        return [f"must be empty or {_NAME_RULE}"]
    return []


def labels_errors(labels: Mapping[str, str]) -> list[str]:
    """Labels or a node selector: each reason names the key it is about."""
    errors = []
    for key, value in labels.items():
        errors += [f"the key {key!r} {reason}" for reason in qualified_name_errors(key)]
        errors += [f"the value of {key!r} {reason}" for reason in label_value_errors(value)]
    return errors


def annotations_errors(annotations: Mapping[str, str]) -> list[str]:
    """Annotation keys are qualified names (upper case allowed); all of them together, keys and
    values, fit in 256 KiB."""
    errors = []
    for key in annotations:
        errors += [f"the key {key!r} {reason}" for reason in qualified_name_errors(key.lower())]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        errors.append(f"together take {size:,} bytes, more than 256 KiB")
    return errors


def toleration_errors(toleration: Mapping[str, Any]) -> dict[str, str]:
    """One toleration in Kubernetes' spelling (key, operator, value, effect, tolerationSeconds):
    the reason for each field the API server would refuse."""
    errors: dict[str, str] = {}
    for name in ("key", "operator", "value", "effect"):
        if not isinstance(toleration.get(name, ""), str):
            errors[name] = "must be a string"
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        errors["tolerationSeconds"] = "must be a whole number of seconds"
    elif seconds is not None and not -(2**63) <= seconds < 2**63:
        # An int64 in the API: the server cannot even read a larger number.
        errors["tolerationSeconds"] = f"is out of range (at most {2**63 - 1:,} seconds)"
    if errors:
        return errors
    key, operator = toleration.get("key", ""), toleration.get("operator", "")
    value, effect = toleration.get("value", ""), toleration.get("effect", "")
    if key:
        reasons = qualified_name_errors(key)
        if reasons:
            errors["key"] = f"is not a valid key: it {'; it '.join(reasons)}"
    elif operator != "Exists":
        errors["operator"] = "must be Exists when the key is empty (it then matches every taint)"
    if operator in ("Equal", ""):
        reasons = label_value_errors(value)
        if reasons:
            errors["value"] = reasons[0]
    elif operator == "Exists":
        if value:
            errors["value"] = "must be empty when the operator is Exists"
    else:
        errors["operator"] = "must be Equal or Exists"
    if effect and effect not in TAINT_EFFECTS:
        errors["effect"] = "must be NoSchedule, PreferNoSchedule or NoExecute"
    elif seconds is not None and effect != "NoExecute":
        errors["effect"] = "must be NoExecute when tolerationSeconds is set"
    return errors


NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
# matchFields: the node's own fields, of which the API server accepts only its name.
NODE_FIELD_KEYS = (NODE_NAME_FIELD,)
NODE_FIELD_OPERATORS = ("In", "NotIn")
# What one pod's node affinity may cost the scheduler. kube-apiserver bounds no count here, only
# the whole object (1.5 MiB, etcd's request limit), which still lets a pod carry 60,000 terms
# that every node is matched against at every round; koordweb bounds the counts instead, well
# above what any workload writes, and refuses more at every door with the field named.
AFFINITY_TERMS_MAX = 100  # nodeSelectorTerms of the required affinity; preferred terms alike
AFFINITY_EXPRESSIONS_MAX = 100  # matchExpressions of one term
AFFINITY_VALUES_MAX = 1000  # values of one expression


def affinity_errors(affinity: Any) -> dict[str, str]:
    """A pod's `spec.affinity` as the API server checks it (the decoder's types, then
    `ValidateNodeSelector`, `ValidateNodeSelectorRequirement` and the preferred terms' weights):
    the reason for each field it would refuse, keyed by the path under `affinity`."""
    if not isinstance(affinity, dict):
        return {"": "must be an object (nodeAffinity, podAffinity, podAntiAffinity)"}
    errors: dict[str, str] = {}
    for name in ("podAffinity", "podAntiAffinity"):
        if affinity.get(name) is not None and not isinstance(affinity[name], dict):
            errors[name] = "must be an object"
    node = affinity.get("nodeAffinity")
    if node is None:
        return errors
    if not isinstance(node, dict):
        errors["nodeAffinity"] = "must be an object"
        return errors
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    path = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    if required is not None:
        if not isinstance(required, dict):
            errors[path] = "must be an object with nodeSelectorTerms"
        else:
            terms = required.get("nodeSelectorTerms")
            if not isinstance(terms, list) or not terms:
                errors[f"{path}.nodeSelectorTerms"] = "must have at least one node selector term"
            elif len(terms) > AFFINITY_TERMS_MAX:
                errors[f"{path}.nodeSelectorTerms"] = _too_many(len(terms), AFFINITY_TERMS_MAX)
            else:
                for i, term in enumerate(terms):
                    where = f"{path}.nodeSelectorTerms[{i}]"
                    errors.update(_term_errors(term, where, label_values=True))
    preferred = node.get("preferredDuringSchedulingIgnoredDuringExecution")
    path = "nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    if preferred is not None:
        if not isinstance(preferred, list):
            errors[path] = "must be a list of weighted preferences"
            return errors
        if len(preferred) > AFFINITY_TERMS_MAX:
            errors[path] = _too_many(len(preferred), AFFINITY_TERMS_MAX)
            return errors
        for i, item in enumerate(preferred):
            at = f"{path}[{i}]"
            if not isinstance(item, dict):
                errors[at] = "must be an object with weight and preference"
                continue
            weight = item.get("weight")
            if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                errors[f"{at}.weight"] = "must be a whole number in the range 1-100"
            errors.update(_term_errors(item.get("preference"), f"{at}.preference"))
    return errors


def _term_errors(term: Any, path: str, *, label_values: bool = False) -> dict[str, str]:
    """`label_values`: the values of In and NotIn must be label values (a required term, as the
    API server checks new pods; a preferred one is not checked so)."""
    if not isinstance(term, dict):
        return {path: "must be an object with matchExpressions or matchFields"}
    errors: dict[str, str] = {}
    fields = term.get("matchFields")
    if fields is not None and not isinstance(fields, list):
        errors[f"{path}.matchFields"] = "must be a list"
    elif fields:
        for i, requirement in enumerate(fields):
            errors.update(_field_requirement_errors(requirement, f"{path}.matchFields[{i}]"))
    requirements = term.get("matchExpressions")
    if requirements is None:
        return errors
    if not isinstance(requirements, list):
        errors[f"{path}.matchExpressions"] = "must be a list"
        return errors
    if len(requirements) > AFFINITY_EXPRESSIONS_MAX:
        errors[f"{path}.matchExpressions"] = _too_many(len(requirements), AFFINITY_EXPRESSIONS_MAX)
        return errors
    for i, requirement in enumerate(requirements):
        where = f"{path}.matchExpressions[{i}]"
        errors.update(_requirement_errors(requirement, where, label_values=label_values))
    return errors


def _field_requirement_errors(requirement: Any, path: str) -> dict[str, str]:
    """A matchFields entry as `ValidateNodeFieldSelectorRequirement` checks it: key
    `metadata.name`, the node's name (the only field key), operator In or NotIn, one value."""
    if not isinstance(requirement, dict):
        return {path: "must be an object with key, operator and values"}
    errors: dict[str, str] = {}
    if requirement.get("key") not in NODE_FIELD_KEYS:
        errors[f"{path}.key"] = f"must be {' or '.join(NODE_FIELD_KEYS)} (a node field)"
    values = requirement.get("values")
    if requirement.get("operator") not in NODE_FIELD_OPERATORS:
        errors[f"{path}.operator"] = f"must be one of {', '.join(NODE_FIELD_OPERATORS)}"
    elif not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], str):
        errors[f"{path}.values"] = "must be one node name when the operator is In or NotIn"
    return errors


def _requirement_errors(requirement: Any, path: str, *, label_values: bool) -> dict[str, str]:
    if not isinstance(requirement, dict):
        return {path: "must be an object with key, operator and values"}
    key, operator = requirement.get("key"), requirement.get("operator")
    values = requirement.get("values")
    errors: dict[str, str] = {}
    if not isinstance(key, str):
        errors[f"{path}.key"] = "must be a string"
    else:
        reasons = qualified_name_errors(key)
        if reasons:
            errors[f"{path}.key"] = f"is not a valid key: it {'; it '.join(reasons)}"
    if values is not None and (
        not isinstance(values, list) or not all(isinstance(v, str) for v in values)
    ):
        errors[f"{path}.values"] = "must be a list of strings"
        return errors
    count = len(values or [])
    if count > AFFINITY_VALUES_MAX:
        errors[f"{path}.values"] = _too_many(count, AFFINITY_VALUES_MAX)
        return errors
    if operator in ("In", "NotIn") and label_values:
        for i, value in enumerate(values or []):
            reasons = label_value_errors(value)
            if reasons:
                errors[f"{path}.values[{i}]"] = reasons[0]
    if operator in ("In", "NotIn") and not count:
        errors[f"{path}.values"] = "must be given when the operator is In or NotIn"
    elif operator in ("Exists", "DoesNotExist") and count:
        errors[f"{path}.values"] = "may not be given when the operator is Exists or DoesNotExist"
    elif operator in ("Gt", "Lt") and count != 1:
        errors[f"{path}.values"] = "must be one value when the operator is Gt or Lt"
    elif operator not in NODE_SELECTOR_OPERATORS:
        errors[f"{path}.operator"] = f"must be one of {', '.join(NODE_SELECTOR_OPERATORS)}"
    return errors


def _too_many(count: int, limit: int) -> str:
    return f"may have at most {limit} entries, got {count} (koordweb's bound on what a pod costs)"


# A container may ask for these unqualified resources (Kubernetes' standard container resource
# names); anything else needs a domain (`nvidia.com/gpu`, `koordinator.sh/gpu-core`).
CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def container_resource_errors(names: Any) -> list[str]:
    """Resource names a container's requests or limits may not carry, as the API server's
    `validateContainerResourceName` refuses them (`pods`, say, is a node's, not a container's)."""
    return [
        f"{name!r} is not a resource a container can ask for (cpu, memory, ephemeral-storage, "
        "hugepages-<size> or a name with a domain such as nvidia.com/gpu)"
        for name in names
        if "/" not in str(name)
        and str(name) not in CONTAINER_RESOURCES
        and not str(name).startswith("hugepages-")
    ]
