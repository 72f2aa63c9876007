"""What the submit form offers a user: only the quotas and priority classes they can use.

A tenant is offered the leaf quotas they are a member of (a parent quota, another tenant's
quota or "no quota" would be refused) and the priority classes below Kubernetes' system range
(values above one billion, `system-*`, are for the cluster's own components); an admin is
offered every leaf quota, "no quota" and every class.
"""

from __future__ import annotations

from typing import Any

from koordweb.models import Cluster, Node, PriorityClass
from koordweb.selectors.tenancy import quotas_of_member, user_is_admin
from scheduler.vocabulary import CAMBRICON_MLU, GPU_CORE, HUAWEI_NPU, NVIDIA_GPU

# What the submit form offers, by the resource a cluster must have for it: (words, resource).
SUBMIT_DEVICES = {
    "gpu": ("NVIDIA GPU (whole cards)", NVIDIA_GPU),
    "gpu-share": ("GPU share or GPU memory (part of a card)", GPU_CORE),
    "npu": ("Ascend NPU (whole cards)", HUAWEI_NPU),
    "mlu": ("Cambricon MLU (whole cards)", CAMBRICON_MLU),
}
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


def submit_priority_class_rows(*, user: Any, cluster: Cluster) -> list[PriorityClass]:
    """The classes `submit_priority_classes` names, as rows (the form shows their values)."""
    usable = set(submit_priority_classes(user=user, cluster=cluster))
    classes = PriorityClass.objects.filter(cluster=cluster).order_by("-value", "name")
    return [pc for pc in classes if pc.name in usable]


def submit_devices(cluster: Cluster) -> list[tuple[str, str]]:
    """The kinds of accelerator the form offers: those some node of the cluster has."""
    have: set[str] = set()
    for allocatable in Node.objects.filter(cluster=cluster).values_list("allocatable", flat=True):
        have |= set(allocatable or {})
    if NVIDIA_GPU in have:
        have.add(GPU_CORE)  # an NVIDIA card can be shared (Koordinator's DeviceShare)
    return [(key, words) for key, (words, resource) in SUBMIT_DEVICES.items() if resource in have]
