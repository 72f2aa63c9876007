"""Patch bodies: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902).

Strategic merge is the API server's flavour for built-in kinds: lists named below merge item by
item on a key (`conditions` by `type`, `containers` by `name`), `$patch: delete|replace` directives
are honoured, and every other list is replaced as in a merge patch.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.fakekube.errors import ApiError, bad_request

MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "ownerReferences": "uid",
    "taints": "key",
    "addresses": "type",
    "imagePullSecrets": "name",
    "readinessGates": "conditionType",
}


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_list(result.get(key) or [], value, MERGE_KEYS[key])
        else:
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise bad_request(f"map: {item!r} does not contain declared merge key: {key}")
        index = next((i for i, m in enumerate(merged) if m.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
        elif index is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def _parent(doc: Any, parts: list[str]) -> Any:
    for part in parts[:-1]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def json_patch(target: Any, operations: list[dict[str, Any]]) -> Any:
    doc = copy.deepcopy(target)
    for op in operations:
        parts = _pointer(op.get("path", ""))
        try:
            parent, last = _parent(doc, parts), parts[-1]
            kind = op.get("op")
            if kind == "test":
                current = parent[int(last)] if isinstance(parent, list) else parent[last]
                if current != op.get("value"):
                    raise ApiError(422, "Invalid", f"the test operation at {op['path']} failed")
            elif kind == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif kind in {"add", "replace"}:
                value = copy.deepcopy(op.get("value"))
                if isinstance(parent, list):
                    index = len(parent) if last == "-" else int(last)
                    if kind == "add":
                        parent.insert(index, value)
                    else:
                        parent[index] = value
                else:
                    if kind == "replace" and last not in parent:
                        raise KeyError(last)
                    parent[last] = value
            else:
                raise bad_request(f"unsupported JSON patch operation {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ApiError(
                422,
                "Invalid",
                f"the server rejected our request due to an error in our request: "
                f"{op.get('op')} {op.get('path')}: {exc!r}",
            ) from exc
    return doc
