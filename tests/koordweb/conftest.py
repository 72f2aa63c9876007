"""Fixtures for koordweb against the fake Kubernetes API server (tests/fakekube)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from koordweb.backends.kube import KubeClusterClient
from koordweb.models import Cluster
from tests.fakekube import FakeKube
from tests.fakekube.testing import fake_kube, seed_blocks
from tests.koordweb.kube_helpers import fast_retry
from tests.koordweb.schema import latest_migrations, migrate_to

kube = pytest.fixture(fake_kube, name="kube")


@pytest.fixture
def kube_client(kube: FakeKube) -> Iterator[KubeClusterClient]:
    """The real client connected to the (empty) fake server."""
    with KubeClusterClient.from_url(
        kube.url, retry=fast_retry(), watch_timeout=1, sync_timeout=10
    ) as connected:
        yield connected


@pytest.fixture
def cluster_client(kube: FakeKube) -> Iterator[KubeClusterClient]:
    """The real client connected to the fake server holding one spine of two 2-node blocks."""
    seed_blocks(kube)
    with KubeClusterClient.from_url(
        kube.url, retry=fast_retry(attempts=4), watch_timeout=1, sync_timeout=10, budget_attempts=3
    ) as connected:
        yield connected


@pytest.fixture
def kube_cluster(db: Any) -> Cluster:
    """The database's row for the cluster behind the fake server."""
    return Cluster.objects.create(name="k8s", backend=Cluster.Backend.KUBERNETES)


@pytest.fixture
def latest(transactional_db: None) -> Iterator[list[tuple[str, str]]]:
    """The newest migrations, for a migration test to come back to (and is brought back to)."""
    leaves = latest_migrations()
    yield leaves
    migrate_to(leaves)
