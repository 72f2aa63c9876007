"""The two-team world most tests start from: one cluster of GPU nodes, an admin, alice in quota
team-a and bob in team-b, two priority classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from koordweb import models
from tests.builders.accounts import UserFactory
from tests.builders.cluster import ClusterFactory, PriorityClassFactory, QuotaFactory
from tests.builders.devices import gpu_node
from tests.builders.topology import topology


@dataclass
class Teams:
    """One cluster, an admin and two teams: alice in quota team-a, bob in team-b."""

    cluster: models.Cluster
    admin: Any
    alice: Any
    bob: Any
    root: models.ElasticQuota
    team_a: models.ElasticQuota
    team_b: models.ElasticQuota
    prod: models.PriorityClass  # koord-prod, 9000
    batch: models.PriorityClass  # koord-batch, 5000
    nodes: list[models.Node]


# name: (spine, block, vendor); four nodes of 8 H100s, a block each, two blocks a spine.


# name: (spine, block, vendor); four nodes of 8 H100s, a block each, two blocks a spine.
FOUR_BLOCKS = {f"node-{i}": (f"s{i // 2}", f"b{i}", "nvidia") for i in range(4)}


def teams(
    layout: dict[str, tuple[str, str, str]] | None = None,
    gpu_quota: dict[str, tuple[int, int]] | None = None,
    unhealthy: dict[str, tuple[int, ...]] | None = None,
) -> Teams:
    """`layout` names each node's (spine, block, vendor); `gpu_quota` (min, max) GPUs per quota."""
    cluster = ClusterFactory(name="default")
    topology(cluster)
    nodes = []
    for name, (spine, block, vendor) in (layout or FOUR_BLOCKS).items():
        huawei = vendor == "huawei"
        nodes.append(
            gpu_node(
                cluster,
                name,
                spine=spine,
                block=block,
                vendor=vendor,
                model="910B3" if huawei else "H100",
                resource="huawei.com/npu" if huawei else "nvidia.com/gpu",
                unhealthy=(unhealthy or {}).get(name, ()),
            )
        )
    admin = UserFactory(username="admin", is_staff=True, is_superuser=True)
    alice = UserFactory(username="alice")
    bob = UserFactory(username="bob")

    def limits(name: str) -> dict[str, Any]:
        if gpu_quota is None:
            return {}
        low, high = gpu_quota[name]
        return {"min": {"nvidia.com/gpu": low}, "max": {"nvidia.com/gpu": high}}

    root = QuotaFactory(cluster=cluster, name="root", is_parent=True, **limits("root"))
    team_a = QuotaFactory(
        cluster=cluster, name="team-a", parent=root, members=[alice], **limits("team-a")
    )
    team_b = QuotaFactory(
        cluster=cluster, name="team-b", parent=root, members=[bob], **limits("team-b")
    )
    prod = PriorityClassFactory(cluster=cluster, name="koord-prod", value=9000)
    batch = PriorityClassFactory(
        cluster=cluster, name="koord-batch", value=5000, global_default=True
    )
    return Teams(cluster, admin, alice, bob, root, team_a, team_b, prod, batch, nodes)
