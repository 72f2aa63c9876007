"""Cluster backends behind one protocol (sync, enact): simulated and kubernetes."""

from __future__ import annotations

from django.conf import settings

from koordweb.backends.base import ClusterBackend
from koordweb.models import Cluster


def backend_for(cluster: Cluster) -> ClusterBackend:
    """The backend a cluster runs on: its own setting, else KOORDWEB_BACKEND."""
    name = cluster.backend or settings.KOORDWEB_BACKEND
    if name == Cluster.Backend.KUBERNETES:
        from koordweb.backends.kubernetes import KubernetesBackend

        return KubernetesBackend.from_settings(cluster.scheduler_name)
    from koordweb.backends.simulated import SimulatedBackend

    return SimulatedBackend()
