"""The kubernetes cluster backend's wire layer: the only code that imports the kubernetes client.

`KubeClusterClient` mirrors a cluster as manifest dicts and enacts bind/evict/nominate and object
writes, idempotently and with bounded retries.
"""

from kubernetes.client.exceptions import ApiException

from koordweb.backends.kube.client import KubeClusterClient
from koordweb.backends.kube.connection import KubeUnavailable, RetryPolicy, api_client
from koordweb.backends.kube.kinds import WATCHED_KINDS, WatchedKind
from koordweb.backends.kube.objects import gang_pods
from koordweb.backends.kube.pods import BindOutcome, BindResult, EvictOutcome, EvictResult

__all__ = [
    "WATCHED_KINDS",
    "ApiException",
    "BindOutcome",
    "BindResult",
    "EvictOutcome",
    "EvictResult",
    "KubeClusterClient",
    "KubeUnavailable",
    "RetryPolicy",
    "WatchedKind",
    "api_client",
    "gang_pods",
]
