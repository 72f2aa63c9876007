"""Field validation kube-apiserver runs on a pod it is asked to create, as far as koordweb writes
those fields: its name, metadata labels and annotations, spec.nodeSelector, spec.tolerations, the
node affinity and the containers' resource names.

Written from apimachinery's `util/validation` (IsQualifiedName, IsValidLabelValue,
IsDNS1123Subdomain and their messages), `api/validation` (ValidateAnnotations) and the core API's
`validateTolerations`, `ValidateNodeSelectorRequirement`, `ValidateNodeFieldSelectorRequirement`
and `validateContainerResourceName`, on purpose apart from koordweb's own checks
(`koordweb.kubenames`): the fake stands in for the real server, so it must not share the code
it is testing. Errors come back as `field.Error`s do: (field path, cause reason, message), the
message in Go's words.
"""

from __future__ import annotations

import json
import re
from typing import Any

QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
LABEL_VALUE_FMT = f"({QUALIFIED_NAME_FMT})?"
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character"
)
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = f"{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)
TOTAL_ANNOTATION_SIZE = 256 * (1 << 10)

Error = tuple[str, str, str]  # field path, cause reason, message


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    text = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{fmt}')"


def _full(fmt: str, value: str) -> bool:
    return re.fullmatch(fmt, value) is not None


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _full(DNS1123_SUBDOMAIN_FMT, value):
        errs.append(_regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += [f"prefix part {m}" for m in is_dns1123_subdomain(prefix)]
    else:
        return [
            "a qualified name "
            + _regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _full(QUALIFIED_NAME_FMT, name):
        errs.append(
            "name part "
            + _regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _full(LABEL_VALUE_FMT, value):
        errs.append(_regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _invalid(path: str, value: Any, detail: str) -> Error:
    """field.Invalid of a string value: quoted, as Go's %q."""
    return (path, "FieldValueInvalid", f"Invalid value: {json.dumps(value)}: {detail}")


def _go_toleration(toleration: dict[str, Any]) -> str:
    """A core.Toleration as %#v prints it (the pointer's address shown as Go shows a set one)."""
    seconds = toleration.get("tolerationSeconds")
    pointer = "(*int64)(nil)" if seconds is None else "(*int64)(0xc000a1b2c8)"
    fields = ", ".join(
        f'{name}:"{toleration.get(key, "")}"'
        for name, key in (("Key", "key"), ("Operator", "operator"), ("Value", "value"))
    )
    return (
        f'core.Toleration{{{fields}, Effect:"{toleration.get("effect", "")}", '
        f"TolerationSeconds:{pointer}}}"
    )


def validate_labels(labels: Any, path: str) -> list[Error]:
    errs: list[Error] = []
    for key, value in (labels or {}).items():
        errs += [_invalid(path, key, m) for m in is_qualified_name(key)]
        errs += [_invalid(path, value, m) for m in is_valid_label_value(str(value))]
    return errs


def validate_annotations(annotations: Any, path: str) -> list[Error]:
    errs: list[Error] = []
    total = 0
    for key, value in (annotations or {}).items():
        errs += [_invalid(path, key, m) for m in is_qualified_name(key.lower())]
        total += len(key.encode()) + len(str(value).encode())  # Go counts bytes
    if total > TOTAL_ANNOTATION_SIZE:
        errs.append(
            (
                path,
                "FieldValueTooLong",
                f"Too long: must have at most {TOTAL_ANNOTATION_SIZE} bytes",
            )
        )
    return errs


def validate_tolerations(tolerations: Any, path: str) -> list[Error]:
    errs: list[Error] = []
    for i, toleration in enumerate(tolerations or []):
        at = f"{path}[{i}]"
        key, operator = toleration.get("key", ""), toleration.get("operator", "")
        value, effect = toleration.get("value", ""), toleration.get("effect", "")
        if key:
            errs += [_invalid(f"{at}.key", key, m) for m in is_qualified_name(key)]
        if not key and operator != "Exists":
            errs.append(
                _invalid(
                    f"{at}.operator",
                    operator,
                    'operator must be Exists when `key` is empty, which means "match all values '
                    'and all keys"',
                )
            )
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(
                _invalid(
                    f"{at}.effect",
                    effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
        if operator in ("Equal", ""):
            value_errs = is_valid_label_value(value)
            if value_errs:
                errs.append(_invalid(f"{at}.operator", value, ";".join(value_errs)))
        elif operator == "Exists":
            if value:
                why = "value must be empty when `operator` is 'Exists'"
                shown = _go_toleration(toleration)
                errs.append(
                    (f"{at}.operator", "FieldValueInvalid", f"Invalid value: {shown}: {why}")
                )
        else:
            errs.append(
                (
                    f"{at}.operator",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{operator}": supported values: "Equal", "Exists"',
                )
            )
        if effect and effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            errs.append(
                (
                    f"{at}.effect",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{effect}": supported values: "NoSchedule", '
                    '"PreferNoSchedule", "NoExecute"',
                )
            )
    return errs


STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
NODE_FIELD_SELECTOR_KEYS = ("metadata.name",)


def _required(path: str, detail: str) -> Error:
    return (path, "FieldValueRequired", f"Required value: {detail}")


def _forbidden(path: str, detail: str) -> Error:
    return (path, "FieldValueForbidden", f"Forbidden: {detail}")


def validate_container_resources(spec: dict[str, Any]) -> list[Error]:
    """validateContainerResourceName over every container's requests and limits: a name without
    a domain must be one a container may ask for."""
    errs: list[Error] = []
    for kind in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(kind) or []):
            resources = (container or {}).get("resources") or {}
            for field in ("limits", "requests"):
                for name in resources.get(field) or {}:
                    path = f"spec.{kind}[{i}].resources.{field}[{name}]"
                    if "/" in name:
                        continue
                    if name in STANDARD_CONTAINER_RESOURCES or name.startswith("hugepages-"):
                        continue
                    errs.append(_invalid(path, name, "must be a standard resource for containers"))
    return errs


def _requirement(req: dict[str, Any], path: str, label_values: bool) -> list[Error]:
    """ValidateNodeSelectorRequirement: the values an operator takes (In and NotIn values are
    label values in a required term of a new pod), then the key."""
    operator, values = req.get("operator", ""), req.get("values") or []
    errs: list[Error] = []
    if operator in ("In", "NotIn"):
        if not values:
            errs.append(
                _required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
            )
        if label_values:
            for i, value in enumerate(values):
                errs += [
                    _invalid(f"{path}.values[{i}]", value, m) for m in is_valid_label_value(value)
                ]
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errs.append(
                _forbidden(
                    f"{path}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(
                _required(
                    f"{path}.values",
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                )
            )
    else:
        errs.append(_invalid(f"{path}.operator", operator, "not a valid selector operator"))
    key = req.get("key", "")
    errs += [_invalid(f"{path}.key", key, m) for m in is_qualified_name(key)]
    return errs


def _field_requirement(req: dict[str, Any], path: str) -> list[Error]:
    """ValidateNodeFieldSelectorRequirement: In or NotIn one value, on metadata.name only."""
    errs: list[Error] = []
    operator = req.get("operator", "")
    if operator in ("In", "NotIn"):
        if len(req.get("values") or []) != 1:
            errs.append(
                _required(
                    f"{path}.values",
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field "
                    "selector",
                )
            )
    else:
        errs.append(_invalid(f"{path}.operator", operator, "not a valid selector operator"))
    key = req.get("key", "")
    if key not in NODE_FIELD_SELECTOR_KEYS:
        errs.append(_invalid(f"{path}.key", key, "not a valid field selector key"))
    return errs


def _term(term: dict[str, Any], path: str, label_values: bool) -> list[Error]:
    errs: list[Error] = []
    for j, req in enumerate(term.get("matchExpressions") or []):
        errs += _requirement(req or {}, f"{path}.matchExpressions[{j}]", label_values)
    for j, req in enumerate(term.get("matchFields") or []):
        errs += _field_requirement(req or {}, f"{path}.matchFields[{j}]")
    return errs


def validate_node_affinity(affinity: Any, path: str) -> list[Error]:
    """The node affinity part of validateAffinity: the required node selector has terms and each
    requirement its operator's values; a preferred term weighs 1-100."""
    node = (affinity or {}).get("nodeAffinity")
    if not node:
        return []
    errs: list[Error] = []
    at = f"{path}.nodeAffinity"
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        selector = f"{at}.requiredDuringSchedulingIgnoredDuringExecution"
        terms = required.get("nodeSelectorTerms") or []
        if not terms:
            errs.append(
                _required(
                    f"{selector}.nodeSelectorTerms", "must have at least one node selector term"
                )
            )
        for i, term in enumerate(terms):
            errs += _term(term or {}, f"{selector}.nodeSelectorTerms[{i}]", True)
    for i, term in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        where = f"{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weight = (term or {}).get("weight", 0)
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            errs.append(
                (
                    f"{where}.weight",
                    "FieldValueInvalid",
                    f"Invalid value: {weight}: must be in the range 1-100",
                )
            )
        errs += _term((term or {}).get("preference") or {}, f"{where}.preference", False)
    return errs


def pod_errors(pod: dict[str, Any]) -> list[Error]:
    """What the API server refuses in a pod to create, in the order it checks them."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    name = metadata.get("name", "")
    return [
        *[_invalid("metadata.name", name, m) for m in is_dns1123_subdomain(name) if name],
        *validate_labels(metadata.get("labels"), "metadata.labels"),
        *validate_annotations(metadata.get("annotations"), "metadata.annotations"),
        # ValidatePodSpec's order: containers, init containers, nodeSelector, affinity, then
        # (among what is checked here) tolerations.
        *validate_container_resources(spec),
        *validate_labels(spec.get("nodeSelector"), "spec.nodeSelector"),
        *validate_node_affinity(spec.get("affinity"), "spec.affinity"),
        *validate_tolerations(spec.get("tolerations"), "spec.tolerations"),
    ]
