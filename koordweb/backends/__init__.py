"""Cluster backends behind one protocol (sync, enact): simulated and kubernetes."""

from __future__ import annotations

from django.conf import settings

from koordweb.backends.base import ClusterBackend
from koordweb.models import Cluster


def backend_for(cluster: Cluster) -> ClusterBackend:
    """The backend a cluster runs on: its own `backend` field. KOORDWEB_BACKEND chooses it when
    seed_demo creates the cluster (and stands in for a field left empty)."""
    name = cluster.backend or settings.KOORDWEB_BACKEND
    if name == Cluster.Backend.KUBERNETES:
        from koordweb.backends.kubernetes import KubernetesBackend

        return KubernetesBackend.from_settings(cluster.scheduler_name)
    from koordweb.backends.simulated import SimulatedBackend

    return SimulatedBackend()
