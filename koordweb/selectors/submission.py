"""What the submit form offers a user: only the quotas and priority classes they can use.

A tenant is offered the leaf quotas they are a member of (a parent quota, another tenant's
quota or "no quota" would be refused) and the priority classes below Kubernetes' system range
(values above one billion, `system-*`, are for the cluster's own components); an admin is
offered every leaf quota, "no quota" and every class.
"""

from __future__ import annotations

from typing import Any

from koordweb.models import Cluster, PriorityClass
from koordweb.selectors.tenancy import quotas_of_member, user_is_admin

# Kubernetes reserves priorities above this for system-cluster-critical and the like.
SYSTEM_PRIORITY = 1_000_000_000


def submit_quotas(*, user: Any, cluster: Cluster) -> list[str]:
    quotas = quotas_of_member(user=user).filter(cluster=cluster, is_parent=False)
    return list(quotas.order_by("name").values_list("name", flat=True))


def is_system_class(priority_class: PriorityClass) -> bool:
    """A class for the cluster's own components, never a tenant's to use."""
    return priority_class.value > SYSTEM_PRIORITY or priority_class.name.startswith("system-")


def submit_priority_classes(*, user: Any, cluster: Cluster) -> list[str]:
    classes = PriorityClass.objects.filter(cluster=cluster).order_by("-value", "name")
    admin = user_is_admin(user)
    return [pc.name for pc in classes if admin or not is_system_class(pc)]
