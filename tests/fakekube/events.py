"""Events as kube-apiserver validates them (pkg/apis/core/validation/events.go).

Every Event passes the legacy checks (`legacyValidateEvent`): an Event without `eventTime` (as
client-go's record package writes core/v1 Events) must be in its involved object's namespace;
one with `eventTime` also needs `reportingController` (a qualified name), `reportingInstance`
(at most 128 characters), `action` (at most 128), `reason` (at most 128), and a message of at
most 1024 characters. An Event created through events.k8s.io/v1 is checked strictly too
(`ValidateEventCreate`): eventTime required, type Normal or Warning, the deprecated fields
(firstTimestamp, lastTimestamp, count, source) unset. An update may not change what an Event
says (involvedObject, reason, message for events.k8s.io; the core API lets count, message and
lastTimestamp move, as client-go's correlator patches them).
"""

from __future__ import annotations

from typing import Any

from tests.fakekube.validation import Error, _invalid, _required, is_dns1123_subdomain
from tests.fakekube.validation import is_qualified_name as _qualified

REPORTING_INSTANCE_MAX = 128
ACTION_MAX = 128
REASON_MAX = 128
NOTE_MAX = 1024
EVENTS_API = "events.k8s.io"


def event_errors(event: dict[str, Any], group: str) -> list[Error]:
    """What the API server refuses in an Event to create through `group` ("" or events.k8s.io)."""
    if group == EVENTS_API:
        event = _from_events_api(event)
    errs = _legacy(event)
    if group != EVENTS_API:
        return errs
    if not event.get("eventTime"):
        errs.append(_required("eventTime", ""))
    if event.get("type") not in ("Normal", "Warning"):
        errs.append(_invalid("type", "", f"has invalid value: {event.get('type') or ''}"))
    for name in ("firstTimestamp", "lastTimestamp"):
        if event.get(name):
            errs.append(_invalid(name, "", "needs to be unset"))
    if event.get("count"):
        errs.append(_invalid("count", "", "needs to be unset"))
    source = event.get("source") or {}
    if source.get("component") or source.get("host"):
        errs.append(_invalid("source", "", "needs to be unset"))
    return errs


def _from_events_api(event: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event in the core shape the validation reads."""
    return {
        **event,
        "involvedObject": event.get("regarding") or {},
        "message": event.get("note", ""),
        "count": event.get("deprecatedCount"),
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "source": event.get("deprecatedSource") or {},
        "reportingComponent": event.get("reportingController", ""),
    }


def _legacy(event: dict[str, Any]) -> list[Error]:
    errs: list[Error] = []
    metadata = event.get("metadata") or {}
    namespace = metadata.get("namespace") or ""
    involved = event.get("involvedObject") or {}
    involved_ns = involved.get("namespace") or ""
    mismatch = _invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if not event.get("eventTime"):
        if not involved_ns:
            if namespace not in ("", "default"):
                errs.append(mismatch)
        elif namespace != involved_ns:
            errs.append(mismatch)
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            errs.append(mismatch)
        controller = event.get("reportingComponent") or ""
        if not controller:
            errs.append(_required("reportingController", ""))
        errs += [_invalid("reportingController", controller, m) for m in _qualified(controller)]
        instance = event.get("reportingInstance") or ""
        if not instance:
            errs.append(_required("reportingInstance", ""))
        if len(instance) > REPORTING_INSTANCE_MAX:
            errs.append(_too_long("reportingInstance", REPORTING_INSTANCE_MAX))
        action = event.get("action") or ""
        if not action:
            errs.append(_required("action", ""))
        if len(action) > ACTION_MAX:
            errs.append(_too_long("action", ACTION_MAX))
        reason = event.get("reason") or ""
        if not reason:
            errs.append(_required("reason", ""))
        if len(reason) > REASON_MAX:
            errs.append(_too_long("reason", REASON_MAX))
        if len(event.get("message") or "") > NOTE_MAX:
            errs.append(_too_long("message", NOTE_MAX))
    errs += [_invalid("namespace", namespace, m) for m in is_dns1123_subdomain(namespace)]
    return errs


def _too_long(path: str, limit: int) -> Error:
    return _invalid(path, "", f"can have at most {limit} characters")


def event_update_errors(new: dict[str, Any], old: dict[str, Any], group: str) -> list[Error]:
    """An update: the legacy checks, and for events.k8s.io what an Event says is immutable."""
    errs = event_errors(new, "") if group != EVENTS_API else _legacy(_from_events_api(new))
    if group == EVENTS_API:
        for name in ("regarding", "reason", "note", "type", "action", "reportingController"):
            if new.get(name) != old.get(name):
                errs.append(_invalid(name, "", "field is immutable"))
    return errs
