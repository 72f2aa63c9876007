"""A small cluster with two tenants and an admin, and API clients authenticated by tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from koordweb.services.tokens import token_create
from tests.koordweb.api import factories as f


@pytest.fixture(autouse=True)
def _private_cache(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.koordweb.api.urls"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Throttle counters must not leak between tests or into other test runs on the machine.
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "api"}
    }
    from django.core.cache import caches

    caches["default"].clear()


@dataclass
class World:
    cluster: Any
    admin: Any
    alice: Any  # tenant A, member of quota team-a
    bob: Any  # tenant B, member of quota team-b
    team_a: Any
    team_b: Any
    prod: Any
    batch: Any
    nodes: list[Any]


@pytest.fixture
def world(db: Any) -> World:
    cluster = f.ClusterFactory(name="default")
    for position, (name, parent, label) in enumerate(
        [
            ("SpineLayer", "", "network.topology.nvidia.com/spine"),
            ("BlockLayer", "SpineLayer", "network.topology.nvidia.com/block"),
            ("NodeTopologyLayer", "BlockLayer", ""),
        ]
    ):
        f.LayerFactory(
            cluster=cluster,
            name=name,
            parent_name=parent,
            label_keys=[label] if label else [],
            position=position,
        )
    nodes = []
    for i in range(4):
        node = f.NodeFactory(
            cluster=cluster,
            name=f"node-{i}",
            labels={
                "network.topology.nvidia.com/spine": f"s{i // 2}",
                "network.topology.nvidia.com/block": f"b{i}",
            },
        )
        nodes.append(node)
        for minor in range(8):
            f.DeviceFactory(node=node, minor=minor)
    admin = f.UserFactory(username="admin", is_staff=True, is_superuser=True)
    alice = f.UserFactory(username="alice")
    bob = f.UserFactory(username="bob")
    root = f.QuotaFactory(cluster=cluster, name="root", is_parent=True)
    team_a = f.QuotaFactory(cluster=cluster, name="team-a", parent=root, members=[alice])
    team_b = f.QuotaFactory(cluster=cluster, name="team-b", parent=root, members=[bob])
    prod = f.PriorityClassFactory(cluster=cluster, name="koord-prod", value=9000)
    batch = f.PriorityClassFactory(
        cluster=cluster, name="koord-batch", value=5000, global_default=True
    )
    return World(cluster, admin, alice, bob, team_a, team_b, prod, batch, nodes)


def token_client(user: Any) -> APIClient:
    client = APIClient()
    _, clear_text = token_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {clear_text}")
    return client


@pytest.fixture
def admin_api(world: World) -> APIClient:
    return token_client(world.admin)


@pytest.fixture
def alice_api(world: World) -> APIClient:
    return token_client(world.alice)


@pytest.fixture
def bob_api(world: World) -> APIClient:
    return token_client(world.bob)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()


def submission(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "train",
        "quota": "team-a",
        "priority_class": "koord-prod",
        "replicas": 2,
        "pod": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"}},
        "topology": {"gather": [{"layer": "BlockLayer", "strategy": "MustGather"}]},
        "duration_seconds": 3600,
    }
    body.update(overrides)
    return body
