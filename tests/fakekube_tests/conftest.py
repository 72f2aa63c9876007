"""Fixtures: a fake API server in a thread, and the real kubernetes client pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.fakekube import FakeKube
from tests.fakekube.testing import fake_kube

kube = pytest.fixture(fake_kube, name="kube")


@pytest.fixture
def api(kube: FakeKube) -> Iterator[client.ApiClient]:
    configuration = client.Configuration(host=kube.url)
    configuration.retries = False
    with client.ApiClient(configuration) as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)
