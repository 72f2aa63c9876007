"""Who owns what: on a Kubernetes-backed cluster, the cluster owns its objects.

Nodes, devices, the network topology, elastic quotas and priority classes of such a cluster are
read from the API server on every sync: an edit made in koordweb would be silently undone (or,
worse, silently differ from what the cluster enforces). So koordweb refuses those edits and says
where to make them. What koordweb itself owns is still editable there: which users are members of
a quota (tenancy), its GPU idle alert threshold, and the cluster's scheduler profile arguments.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Model

from koordweb.models import Cluster
from scheduler.vocabulary import SCHEDULING_GROUP

# Fields of cluster-owned objects that are koordweb's own, even on a Kubernetes cluster.
KOORDWEB_OWNED_FIELDS = {
    "ElasticQuota": frozenset(
        {"members", "gpu_idle_alert_minutes", "gpu_efficiency_threshold_percent"}
    )
}
# What each kind is called in the cluster, for the message.
CLUSTER_KINDS = {
    "Node": "Node",
    "Device": f"Device ({SCHEDULING_GROUP})",
    "TopologyLayer": "ClusterNetworkTopology",
    "ElasticQuota": "ElasticQuota",
    "PriorityClass": "PriorityClass",
}


def cluster_of(obj: Model) -> Cluster | None:
    """The cluster a catalog row belongs to (a device through its node)."""
    cluster = getattr(obj, "cluster", None)
    if cluster is None and getattr(obj, "node", None) is not None:
        cluster = obj.node.cluster  # type: ignore[attr-defined]
    return cluster if isinstance(cluster, Cluster) else None


def cluster_owned_refusal(
    cluster: Cluster | None, model: type[Model], fields: Iterable[str] | None = None
) -> str | None:
    """Why koordweb may not change these fields of a row of `model`, or None when it may.

    `fields` None means the whole row (creating or deleting it)."""
    name = model.__name__
    if (
        cluster is None
        or cluster.backend != Cluster.Backend.KUBERNETES
        or name not in CLUSTER_KINDS
    ):
        return None
    own = KOORDWEB_OWNED_FIELDS.get(name, frozenset())
    if fields is not None and set(fields) <= own:
        return None
    return (
        f"cluster {cluster.name} is a Kubernetes cluster and owns its {CLUSTER_KINDS[name]} "
        "objects: change them in the cluster (for example with kubectl); koordweb follows on "
        "its next sync" + (f". Only {', '.join(sorted(own))} can be changed here" if own else "")
    )
