"""Cordon and uncordon a node, through the cluster: an admin's action on the nodes page (#37).

The cluster's backend makes the change: the simulated backend sets the node's row (the database
is its cluster); the kubernetes backend patches the Node's `spec.unschedulable` through the API
server, as `kubectl cordon` does, and its watch mirror brings the change back to the next sync.
The row then holds the cluster's answer, so the page shows it at once. Its change position
moves with the write, so the next round's warm snapshot reads the node again and the back-off
wakes jobs parked until a node changes (`engine.backoff`). Uncordoning asks for a round: room
has come back. Cordoning evicts nothing; the pods on the node keep running (kubectl drain is
the eviction, and is not this).

Every action is an entry in Django's admin log (who and when, on the node's history page in the
admin, and beside the node on the nodes page) and a line in the `koordweb.audit` log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.models import CHANGE, LogEntry
from django.core.exceptions import PermissionDenied
from django.db import transaction

from koordweb.backends import backend_for
from koordweb.backends.base import ClusterBackend, NodeGone, NodeRefused
from koordweb.backends.kube import KubeUnavailable
from koordweb.models import Cluster, Node
from koordweb.services.rounds import round_request

logger = logging.getLogger("koordweb.audit")

# The admin log's words (the node's history in the Django admin, and beside it on the page).
CORDONED = "Cordoned"
UNCORDONED = "Uncordoned"


class CordonError(Exception):
    """The node could not be cordoned or uncordoned; the message says why, in words."""


@dataclass(frozen=True)
class CordonResult:
    node: str
    cordoned: bool  # the node's state as the cluster answered
    changed: bool  # False: it already was so
    message: str  # what the admin is told


def node_cordon(
    *, cluster: Cluster, name: str, user: Any, backend: ClusterBackend | None = None
) -> CordonResult:
    """Mark the node unschedulable: no new pod is placed on it."""
    return _node_set(cluster=cluster, name=name, user=user, cordon=True, backend=backend)


def node_uncordon(
    *, cluster: Cluster, name: str, user: Any, backend: ClusterBackend | None = None
) -> CordonResult:
    """Make the node schedulable again, and ask for a round."""
    return _node_set(cluster=cluster, name=name, user=user, cordon=False, backend=backend)


def _node_set(
    *, cluster: Cluster, name: str, user: Any, cordon: bool, backend: ClusterBackend | None
) -> CordonResult:
    if not (user is not None and user.is_authenticated and user.is_staff):
        raise PermissionDenied("only an admin cordons or uncordons a node")
    node = Node.objects.filter(cluster=cluster, name=name).first()
    if node is None:
        raise CordonError(f"Cluster {cluster.name} has no node named {name}.")
    verb = "cordon" if cordon else "uncordon"
    # The cluster is asked outside any transaction: an API call must not hold the database.
    try:
        now_cordoned = (backend or backend_for(cluster)).cordon(cluster, name, unschedulable=cordon)
    except NodeGone as error:
        raise CordonError(f"Node {name} is no longer in cluster {cluster.name}.") from error
    except NodeRefused as error:
        raise CordonError(f"The cluster refused to {verb} node {name}: {error}") from error
    except KubeUnavailable as error:
        raise CordonError(
            f"Could not reach cluster {cluster.name} to {verb} node {name}; nothing changed."
        ) from error
    changed = node.unschedulable != now_cordoned
    with transaction.atomic():
        Node.objects.filter(pk=node.pk).exclude(unschedulable=now_cordoned).update(
            unschedulable=now_cordoned
        )
        words = CORDONED if now_cordoned else UNCORDONED
        LogEntry.objects.log_actions(
            user_id=user.pk, queryset=[node], action_flag=CHANGE, change_message=words
        )
        if not now_cordoned:
            round_request(cluster_id=cluster.pk, trigger="manual")
    logger.info(
        "node %s of cluster %s %s by %s%s",
        name,
        cluster.name,
        "cordoned" if now_cordoned else "uncordoned",
        user.get_username(),
        "" if changed else " (no change)",
    )
    return CordonResult(name, now_cordoned, changed, _message(name, now_cordoned, changed))


def _message(name: str, cordoned: bool, changed: bool) -> str:
    if cordoned:
        if not changed:
            return f"Node {name} was already cordoned."
        return f"Cordoned node {name}: no new pod will be placed on it; its pods keep running."
    if not changed:
        return f"Node {name} was not cordoned."
    return f"Uncordoned node {name}: new pods may be placed on it again from the next round."
