"""The load tests' world: a small CPU cluster, one team and an API token per client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.builders.accounts import UserFactory
from tests.builders.cluster import ClusterFactory, NodeFactory, PriorityClassFactory, QuotaFactory


@dataclass
class LoadWorld:
    """The load tests' cluster and one API token per client."""

    cluster: Any
    tokens: list[str]


def load_world(clients: int = 8) -> LoadWorld:
    """A cluster of four 64-CPU nodes, quota team-a for one user, one API token per client."""
    from koordweb.services.tokens import token_create

    cluster = ClusterFactory(name="default")
    for i in range(4):
        NodeFactory(cluster=cluster, name=f"node-{i}")
    user = UserFactory(username="loader")
    root = QuotaFactory(cluster=cluster, name="root", is_parent=True)
    QuotaFactory(
        cluster=cluster,
        name="team-a",
        parent=root,
        members=[user],
        min={"cpu": 64000},
        max={"cpu": 10**9},
    )
    PriorityClassFactory(cluster=cluster, name="koord-batch", value=5000, global_default=True)
    return LoadWorld(cluster, [token_create(user=user)[1] for _ in range(clients)])
