"""Cordon and uncordon from the nodes page on the simulated backend (issue #37): an admin's POST
with its CSRF token, the node's row changed, an audit entry, and the next rounds see it (the warm
snapshot reads the changed row; the back-off lets a parked job try again at once)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from koordweb.engine.backoff import backoff_forget, backoff_state
from koordweb.models import Job, JobState, Node, PodPhase
from koordweb.services.cordon import CordonError, node_cordon, node_uncordon
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory, simulated_round

SMALL = {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    backoff_forget()
    yield
    backoff_forget()


@pytest.fixture
def world(db: Any, settings: Any) -> dict[str, Any]:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.KOORDWEB_CLUSTER = "cordon"
    cluster = ClusterFactory(name="cordon")
    n0 = NodeFactory(cluster=cluster, name="n0", allocatable=SMALL)
    n1 = NodeFactory(cluster=cluster, name="n1.example.com", allocatable={"cpu": 1000})
    users = get_user_model().objects
    admin = users.create_user("root", password="x", is_staff=True)
    tenant = users.create_user("tina", password="x")
    return {"cluster": cluster, "n0": n0, "n1": n1, "admin": admin, "tenant": tenant}


def _client(user: Any, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def _waiting(cluster: Any, cpu: int) -> Job:
    job = JobFactory(
        cluster=cluster,
        name="waiting",
        quota=None,  # a job outside any quota leaves no quota's figures when it is parked
        total_number=1,
        min_available=1,
        submitted_at=timezone.now() - timedelta(minutes=1),
        state=JobState.PENDING,
    )
    PodFactory(job=job, name="waiting-0", requests={"cpu": cpu}, phase=PodPhase.PENDING)
    return job


def test_an_admin_cordons_and_uncordons_from_the_nodes_page(world: dict[str, Any]) -> None:
    client = _client(world["admin"])
    page = client.get(reverse("nodes"), {"state": "ready"}).content.decode()
    assert page.count('name="action" value="cordon"') == 2
    # The form names its cluster: another tab's switch cannot turn it on another cluster's node.
    assert 'action="/nodes/n1.example.com/cordon/?cluster=cordon"' in page
    url = reverse("node-cordon", args=["n1.example.com"])
    answer = client.post(url, {"action": "cordon", "query": "state=ready&evil=x"}, follow=True)
    assert answer.redirect_chain == [(reverse("nodes") + "?state=ready", 302)]
    text = answer.content.decode()
    assert "Cordoned node n1.example.com: no new pod will be placed on it" in text
    assert Node.objects.get(pk=world["n1"].pk).unschedulable
    assert not Node.objects.get(pk=world["n0"].pk).unschedulable
    # The cordoned node has left the "ready" filter; under "cordoned" it offers the way back,
    # with who cordoned it.
    cordoned = client.get(reverse("nodes"), {"state": "cordoned"}).content.decode()
    assert 'data-node="n1.example.com"' in cordoned and 'data-node="n0"' not in cordoned
    assert 'value="uncordon"' in cordoned and "Cordoned (root, " in cordoned
    entry = LogEntry.objects.get()
    assert (entry.user, entry.object_id, entry.object_repr) == (
        world["admin"],
        str(world["n1"].pk),
        "n1.example.com",
    )
    # Cordoning again changes nothing, and says so.
    again = client.post(url, {"action": "cordon"}, follow=True).content.decode()
    assert "Node n1.example.com was already cordoned." in again
    answer = client.post(url, {"action": "uncordon"}, follow=True)
    assert "Uncordoned node n1.example.com" in answer.content.decode()
    assert not Node.objects.get(pk=world["n1"].pk).unschedulable
    assert LogEntry.objects.count() == 3
    assert LogEntry.objects.latest("id").change_message.startswith("Uncordoned")


def test_a_tenant_is_refused_and_sees_no_button(world: dict[str, Any]) -> None:
    client = _client(world["tenant"])
    page = client.get(reverse("nodes"))
    assert page.status_code == 200 and 'name="action"' not in page.content.decode()
    url = reverse("node-cordon", args=["n0"])
    assert client.post(url, {"action": "cordon"}).status_code == 403
    assert not Node.objects.get(pk=world["n0"].pk).unschedulable
    with pytest.raises(PermissionDenied):
        node_cordon(cluster=world["cluster"], name="n0", user=world["tenant"])
    assert LogEntry.objects.count() == 0


def test_the_form_needs_its_csrf_token_a_post_and_a_known_action(world: dict[str, Any]) -> None:
    url = reverse("node-cordon", args=["n0"])
    assert _client(world["admin"], csrf=True).post(url, {"action": "cordon"}).status_code == 403
    client = _client(world["admin"])
    assert client.get(url).status_code == 405
    assert client.post(url, {"action": "drain"}).status_code == 400
    assert not Node.objects.get(pk=world["n0"].pk).unschedulable


def test_an_unknown_node_is_said_in_words(world: dict[str, Any]) -> None:
    client = _client(world["admin"])
    answer = client.post(reverse("node-cordon", args=["n9"]), {"action": "cordon"}, follow=True)
    assert "Cluster cordon has no node named n9." in answer.content.decode()
    with pytest.raises(CordonError):
        node_uncordon(cluster=world["cluster"], name="n9", user=world["admin"])


def test_the_next_rounds_see_the_cordon_and_the_uncordon(world: dict[str, Any]) -> None:
    cluster, admin = world["cluster"], world["admin"]
    t0 = timezone.now()
    simulated_round(cluster, now=t0)  # the warm state is built before the cordon
    node_cordon(cluster=cluster, name="n0", user=admin)
    waiting = _waiting(cluster, cpu=2000)  # fits only n0
    for seconds in (1, 2.5, 3):
        simulated_round(cluster, now=t0 + timedelta(seconds=seconds))
    assert waiting.pods.get().node_id is None
    # Parked: tried twice, and the last round left it out (its back-off has not expired).
    assert backoff_state(cluster.id).jobs["default/waiting"].attempts == 2
    result = node_uncordon(cluster=cluster, name="n0", user=admin)
    assert result.changed and not result.cordoned
    outcome = simulated_round(cluster, now=t0 + timedelta(seconds=3.5))  # inside its back-off
    assert outcome.round.metrics["backoff_released"] == 1
    assert waiting.pods.get().node.name == "n0"
