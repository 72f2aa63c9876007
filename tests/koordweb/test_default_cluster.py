"""One rule picks the cluster meant when none is named, for the pages and the API alike:
the configured one (KOORDWEB_CLUSTER), else the only one; with several and none configured, none."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.db import SessionStore
from django.core.exceptions import ValidationError
from django.test import RequestFactory

from koordweb.models import Cluster
from koordweb.services.jobs import JobSpec, PodShape, job_spec_resolve
from koordweb.views.common import current_cluster

pytestmark = pytest.mark.django_db


def page_cluster(query: str = "") -> Cluster | None:
    request = RequestFactory().get("/jobs/" + query)
    request.session = SessionStore()
    request.user = AnonymousUser()
    return current_cluster(request)


def api_cluster_error() -> list[str]:
    spec = JobSpec(name="j", pod=PodShape(requests={"cpu": 1000}))
    with pytest.raises(ValidationError) as raised:
        job_spec_resolve(user=None, spec=spec)
    return raised.value.message_dict.get("cluster", [])


def test_the_configured_cluster_is_the_default_of_pages_and_api(settings) -> None:
    Cluster.objects.create(name="alpha")
    Cluster.objects.create(name="beta")
    settings.KOORDWEB_CLUSTER = "beta"
    assert page_cluster().name == "beta"
    # The API resolves the same cluster: its other checks answer, the cluster is not questioned.
    assert api_cluster_error() == []


def test_several_clusters_and_none_configured_name_no_default(settings) -> None:
    Cluster.objects.create(name="alpha")
    Cluster.objects.create(name="beta")
    settings.KOORDWEB_CLUSTER = "missing"
    assert page_cluster() is None
    assert api_cluster_error() == ["name the cluster: there is no default cluster"]
    assert page_cluster("?cluster=alpha").name == "alpha"


def test_the_only_cluster_is_the_default(settings) -> None:
    Cluster.objects.create(name="solo")
    settings.KOORDWEB_CLUSTER = "missing"
    assert page_cluster().name == "solo"
    assert api_cluster_error() == []
