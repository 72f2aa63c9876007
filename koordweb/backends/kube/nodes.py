"""Node writes: cordon and uncordon, as `kubectl cordon` / `kubectl uncordon` make them.

kubectl sends a strategic merge patch of the Node's `spec.unschedulable` (true to cordon; the
field removed to uncordon, since false is its default and is left out of a Node). The patch is
idempotent: cordoning a cordoned node changes nothing. The answer is the Node as the API server
now holds it, so the caller learns what the cluster says rather than what it asked for; the
watch mirror sees the same change a moment later and the next round's sync agrees.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from koordweb.backends.kube.connection import RetryPolicy, status_body


class NodeMissing(LookupError):
    """The API server has no Node of that name (404)."""


class NodeActions:
    """Writes to Nodes over one client; every call goes through the retry policy."""

    def __init__(self, api_client: client.ApiClient, retry: RetryPolicy) -> None:
        # Raw answers (_preload_content=False) do not match the client's static types.
        self.core: Any = client.CoreV1Api(api_client)
        self.retry = retry

    def set_unschedulable(self, name: str, unschedulable: bool) -> bool:
        """Cordon (True) or uncordon (False) the node; returns its `spec.unschedulable` as the
        API server answered. Raises NodeMissing for a 404 and ApiException for any other
        refusal (403 without RBAC's patch on nodes, a webhook's denial)."""
        body = {"spec": {"unschedulable": True if unschedulable else None}}
        verb = "cordon" if unschedulable else "uncordon"
        try:
            answer = self.retry.call(
                f"{verb} node {name}",
                lambda: self.core.patch_node(name, body, _preload_content=False),
            )
        except ApiException as error:
            if error.status == 404:
                raise NodeMissing(name) from error
            raise
        node = json.loads(answer.data or b"{}")
        with contextlib.suppress(Exception):
            answer.release_conn()  # read to its end: the connection goes back to the pool
        return bool(((node or {}).get("spec") or {}).get("unschedulable"))


def refusal_words(error: ApiException) -> str:
    """The API server's own words for a refused node write, with its status code."""
    message = status_body(error).get("message") or error.reason or "refused"
    return f"{message} ({error.status})"
