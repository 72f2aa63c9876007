"""API errors as kube-apiserver reports them: a `Status` body with reason, details and code."""

from __future__ import annotations

from typing import Any

from tests.fakekube.resources import ResourceType


class ApiError(Exception):
    """An error answer: `code` is the HTTP status, `body` the Status object sent with it."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after
        self.body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if not reason:
            del self.body["reason"]  # a handler's own Failure Status may carry none
        if details is not None:
            self.body["details"] = details


def _details(resource: ResourceType | str, name: str, **extra: Any) -> dict[str, Any]:
    if isinstance(resource, str):
        details: dict[str, Any] = {"name": name, "kind": resource}
    else:
        details = {"name": name}
        if resource.group:
            details["group"] = resource.group
        details["kind"] = resource.plural
    details.update(extra)
    return details


def _qualified(resource: ResourceType | str) -> str:
    return resource if isinstance(resource, str) else resource.qualified


def not_found(resource: ResourceType | str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{_qualified(resource)} "{name}" not found', _details(resource, name)
    )


def already_exists(resource: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{resource.qualified} "{name}" already exists',
        _details(resource, name),
    )


def conflict(resource: ResourceType | str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource)} "{name}": {why}',
        _details(resource, name),
    )


STALE_OBJECT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(resource: ResourceType, name: str, field: str, why: str) -> ApiError:
    message = f'{resource.kind} "{name}" is invalid: {field}: {why}'
    details = {
        "name": name,
        **({"group": resource.group} if resource.group else {}),
        "kind": resource.kind,
        "causes": [{"reason": "FieldValueInvalid", "message": why, "field": field}],
    }
    return ApiError(422, "Invalid", message, details)


def invalid_fields(kind: str, name: str, errs: list[tuple[str, str, str]]) -> ApiError:
    """NewInvalid with every field error of a validation (path, cause reason, message): one is
    quoted as it is, several as Go prints an ErrorList (`[a, b]`)."""
    texts = [f"{path}: {message}" for path, _reason, message in errs]
    joined = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    details = {
        "name": name,
        "kind": kind,  # NewInvalid names the Kind (`Pod`), not the resource
        "causes": [
            {"reason": reason, "message": message, "field": path} for path, reason, message in errs
        ],
    }
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {joined}', details)


def forbidden(resource: str, name: str, why: str) -> ApiError:
    """NewForbidden: `resource` is the qualified name, e.g. `poddisruptionbudget.policy`."""
    plural, _, group = resource.partition(".")
    details = {"name": name, **({"group": group} if group else {}), "kind": plural}
    return ApiError(403, "Forbidden", f'{resource} "{name}" is forbidden: {why}', details)


def precondition_conflict(
    kind: str, group: str, name: str, field: str, wanted: str, have: str
) -> ApiError:
    """BeforeDelete's early precondition check: a 409 on the object's Kind (e.g. `Pod`)."""
    if field == "uid":
        why = (
            f"the UID in the precondition ({wanted}) does not match the UID in record ({have}). "
            "The object might have been deleted and then recreated"
        )
    else:
        why = (
            f"the ResourceVersion in the precondition ({wanted}) does not match the "
            f"ResourceVersion in record ({have}). The object might have been modified"
        )
    qualified = f"{kind}.{group}" if group else kind
    details = {"name": name, **({"group": group} if group else {}), "kind": kind}
    return ApiError(
        409, "Conflict", f'Operation cannot be fulfilled on {qualified} "{name}": {why}', details
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed(method: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({method})",
        {},
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_large_resource_version(requested: int, current: int) -> ApiError:
    """apiserver storage's NewTooLargeResourceVersionError: a Timeout (504) whose cause is
    ResourceVersionTooLarge; the watch cache asks for a retry after 1 second."""
    details = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    message = f"Timeout: Too large resource version: {requested}, current: {current}"
    return ApiError(504, "Timeout", message, details)


APF_REJECTION = "Too many requests, please try again later.\n"  # http.Error's plain-text body


def too_many_requests(message: str, retry_after: int, causes: list[dict[str, str]]) -> ApiError:
    details: dict[str, Any] = {"causes": causes}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return ApiError(429, "TooManyRequests", message, details, retry_after=retry_after or None)


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
        {"causes": [{"reason": "UnexpectedServerResponse", "message": content_type}]},
    )


def internal_error(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def injected(code: int) -> ApiError:
    """A fault-injected answer: the reason the real server gives for that code."""
    reasons = {
        429: (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        ),
        500: ("InternalError", "Internal error occurred: injected fault"),
        503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
        504: ("Timeout", "the server was unable to return a response in the time allotted"),
    }
    reason, message = reasons.get(code, ("InternalError", f"injected fault {code}"))
    return ApiError(code, reason, message, {}, retry_after=1 if code == 429 else None)
