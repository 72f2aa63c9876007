"""Enacting decisions on pods: bind, evict, nominate. Each is idempotent and says what happened.

bind: patch the pod's annotations/labels (device allocation, gang labels), then POST pods/binding
with the pod's UID as precondition. A 409 that names our node means an earlier attempt (perhaps
one whose answer was lost) already bound it: success. Another node, another UID or no pod at all
means the decision is dropped. When the caller has the pod as the watch last showed it, the read
is skipped: the patch carries that resourceVersion as its precondition, so a pod changed since
(bound by someone else, say) answers 409 and is read afresh; a pod the watch shows bound is
answered without a call (a pod's node never changes). Answers not read are drained, not decoded.
evict: mark the victim `DisruptionTarget=True` (reason PreemptionByScheduler), then POST
pods/eviction with the victim's UID as precondition. The API server only starts a graceful
deletion: the pod stays on its node, terminating, until its kubelet has stopped it. A 404 is
success (the pod is gone); a 409 means another pod now has the name (not the pod decided about:
it is left alone); a disruption budget's 429 is retried honouring Retry-After up to a bound, then
reported as blocked.
delete: a graceful DELETE with the pod's UID as precondition; 404 and 409 mean it is gone.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from koordweb.backends.kube.connection import RetryPolicy, status_body

log = logging.getLogger(__name__)
_ASSIGNED = re.compile(r'is already assigned to node "([^"]*)"')
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_REASON = "PreemptionByScheduler"


class BindOutcome(enum.StrEnum):
    BOUND = "bound"
    ALREADY_BOUND = "already bound"  # bound to our node by an earlier attempt: success
    DROPPED = "dropped"  # bound elsewhere, replaced or deleted: the decision no longer applies


@dataclass(frozen=True)
class BindResult:
    outcome: BindOutcome
    message: str = ""
    node: str | None = None  # where the pod is bound now, when known

    @property
    def ok(self) -> bool:
        return self.outcome is not BindOutcome.DROPPED


class EvictOutcome(enum.StrEnum):
    EVICTED = "evicted"
    GONE = "gone"  # 404: nothing left to evict, success
    REPLACED = "replaced"  # 409: another pod has the name now; it is not ours to evict
    BLOCKED = "blocked by disruption budget"


@dataclass(frozen=True)
class EvictResult:
    outcome: EvictOutcome
    message: str = ""
    budget_refusals: int = 0

    @property
    def ok(self) -> bool:
        return self.outcome in (EvictOutcome.EVICTED, EvictOutcome.GONE)


def _message(error: ApiException) -> str:
    return str(status_body(error).get("message") or error.reason or error.status)


class PodActions:
    """The pod writes of a round, over one client; every call goes through the retry policy."""

    def __init__(
        self, api_client: client.ApiClient, retry: RetryPolicy, budget_attempts: int = 5
    ) -> None:
        # Raw answers (_preload_content=False) do not match the client's static types.
        self.core: Any = client.CoreV1Api(api_client)
        self.retry = retry
        self.budget_attempts = budget_attempts

    def bind(
        self,
        namespace: str,
        name: str,
        uid: str | None,
        node: str,
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        seen: Mapping[str, Any] | None = None,
    ) -> BindResult:
        """Bind the pod; `seen` is the pod as the watch last showed it, when the caller has it."""
        where = f"bind {namespace}/{name} to {node}"
        seen_meta = (seen or {}).get("metadata") or {}
        if seen and seen_meta.get("uid") and (not uid or seen_meta["uid"] == uid):
            bound_to = (seen.get("spec") or {}).get("nodeName")
            if bound_to:
                return self._already(bound_to, node)
            version = seen_meta.get("resourceVersion")
            if version or not (annotations or labels):
                try:
                    return self._patch_and_bind(
                        where, namespace, name, seen_meta["uid"], node, annotations, labels, version
                    )
                except _Stale:
                    pass  # changed since the watch showed it: read it afresh
        try:
            pod = self.retry.call(
                where,
                lambda: self.core.read_namespaced_pod(name, namespace, _preload_content=False),
            )
        except ApiException as error:
            return self._bind_refused(error, node)
        current = _json(pod)
        found_uid = current["metadata"].get("uid")
        bound_to = (current.get("spec") or {}).get("nodeName")
        if uid and found_uid != uid:
            return BindResult(BindOutcome.DROPPED, f"pod was replaced (uid {found_uid})")
        if bound_to:
            return self._already(bound_to, node)
        try:
            return self._patch_and_bind(
                where, namespace, name, found_uid, node, annotations, labels
            )
        except _Stale as stale:
            return BindResult(BindOutcome.DROPPED, _message(stale.error))

    def _patch_and_bind(
        self,
        where: str,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        annotations: Mapping[str, str] | None,
        labels: Mapping[str, str] | None,
        version: str | None = None,
    ) -> BindResult:
        if annotations or labels:
            metadata: dict[str, Any] = {"uid": uid}
            if version:
                metadata["resourceVersion"] = version
            if annotations:
                metadata["annotations"] = dict(annotations)
            if labels:
                metadata["labels"] = dict(labels)
            try:
                _drain(
                    self.retry.call(
                        where,
                        lambda: self.core.patch_namespaced_pod(
                            name, namespace, {"metadata": metadata}, _preload_content=False
                        ),
                    )
                )
            except ApiException as error:
                if error.status == 409 and (version or "UID" in _message(error)):
                    raise _Stale(error) from error
                return self._bind_refused(error, node)
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            # The typed call would fail to read the 201 Status as a V1Binding: read it raw.
            answer = self.retry.call(
                where,
                lambda: self.core.create_namespaced_pod_binding(
                    name, namespace, body, _preload_content=False
                ),
            )
        except ApiException as error:
            if error.status == 409 and version and not _ASSIGNED.search(_message(error)):
                raise _Stale(error) from error  # another UID under the name: read it afresh
            return self._bind_refused(error, node)
        status = answer.status
        _drain(answer)
        if status not in (200, 201):
            return BindResult(BindOutcome.DROPPED, f"unexpected answer {status}")
        return BindResult(BindOutcome.BOUND, node=node)

    @staticmethod
    def _already(bound_to: str, node: str) -> BindResult:
        if bound_to == node:
            return BindResult(BindOutcome.ALREADY_BOUND, f"already on {node}", node=node)
        return BindResult(BindOutcome.DROPPED, f"already bound to {bound_to}", node=bound_to)

    def _bind_refused(self, error: ApiException, node: str) -> BindResult:
        message = _message(error)
        if error.status == 404:
            return BindResult(BindOutcome.DROPPED, message)
        if error.status == 409:
            assigned = _ASSIGNED.search(message)
            if assigned:
                return self._already(assigned.group(1), node)
            return BindResult(BindOutcome.DROPPED, message)
        raise error

    def nominate(self, namespace: str, name: str, node: str | None) -> bool:
        """Set (or with None clear) `status.nominatedNodeName`; False when the pod is gone."""
        body = {"status": {"nominatedNodeName": node or None}}
        try:
            _drain(
                self.retry.call(
                    f"nominate {namespace}/{name}",
                    lambda: self.core.patch_namespaced_pod_status(
                        name, namespace, body, _preload_content=False
                    ),
                )
            )
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    def evict(
        self, namespace: str, name: str, preemptor: str, uid: str | None = None
    ) -> EvictResult:
        where = f"evict {namespace}/{name}"
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_REASON,
            "message": f"{preemptor}: preempting to accommodate a higher priority pod",
        }
        patch: dict[str, Any] = {"status": {"conditions": [condition]}}
        if uid:
            patch["metadata"] = {"uid": uid}
        try:
            _drain(
                self.retry.call(
                    where,
                    lambda: self.core.patch_namespaced_pod_status(
                        name, namespace, patch, _preload_content=False
                    ),
                )
            )
        except ApiException as error:
            if error.status == 404:
                return EvictResult(EvictOutcome.GONE, _message(error))
            if error.status == 409:
                return EvictResult(EvictOutcome.REPLACED, _replaced(error))
            raise
        eviction: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid:
            eviction["deleteOptions"] = {"preconditions": {"uid": uid}}
        refusals = 0
        while True:
            try:
                _drain(
                    self.retry.call(where, lambda: self._post_eviction(namespace, name, eviction))
                )
                return EvictResult(EvictOutcome.EVICTED, budget_refusals=refusals)
            except ApiException as error:
                if error.status == 404:
                    return EvictResult(EvictOutcome.GONE, _message(error), refusals)
                if error.status == 409:
                    return EvictResult(EvictOutcome.REPLACED, _replaced(error), refusals)
                raise
            except _BudgetRefusal as refusal:
                refusals += 1
                if refusals >= self.budget_attempts:
                    return EvictResult(EvictOutcome.BLOCKED, _message(refusal.error), refusals)
                self.retry.sleep(self.retry.delay(refusals - 1, refusal.error))

    def delete(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """Delete gracefully; True once the cluster has it going (or gone, or replaced)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            _drain(
                self.retry.call(
                    f"delete {namespace}/{name}",
                    lambda: self.core.delete_namespaced_pod(
                        name, namespace, body=body, _preload_content=False
                    ),
                )
            )
        except ApiException as error:
            if error.status in (404, 409):
                return True
            raise
        return True

    def _post_eviction(self, namespace: str, name: str, eviction: dict[str, Any]) -> Any:
        try:
            return self.core.create_namespaced_pod_eviction(
                name, namespace, eviction, _preload_content=False
            )
        except ApiException as error:
            causes = (status_body(error).get("details") or {}).get("causes") or []
            if error.status == 429 and any(c.get("reason") == "DisruptionBudget" for c in causes):
                raise _BudgetRefusal(error) from error  # not throttling: do not retry blindly
            raise


class _Stale(Exception):
    """A precondition taken from the watch's copy failed: the pod changed since."""

    def __init__(self, error: ApiException) -> None:
        super().__init__(str(error))
        self.error = error


class _BudgetRefusal(Exception):
    def __init__(self, error: ApiException) -> None:
        super().__init__(str(error))
        self.error = error


def _replaced(error: ApiException) -> str:
    return f"another pod now has this name, so it was not evicted ({_message(error)})"


def _json(answer: Any) -> dict[str, Any]:
    return json.loads(answer.data)  # type: ignore[no-any-return]


def _drain(answer: Any) -> None:
    """Read an answer we do not use to its end, undecoded, so its connection goes back to the
    pool (an unread one would cost a new connection per call)."""
    with contextlib.suppress(Exception):
        answer.read()
        answer.release_conn()
