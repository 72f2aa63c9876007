"""A cluster's scheduler profile arguments: edited in the admin (validated, nothing half-saved)
and shown on the topology page."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client
from django.urls import reverse

from tests.builders import Pages


def _form(ui: Pages, scheduler_args: Any) -> dict[str, str]:
    cluster = ui.cluster
    return {
        "name": cluster.name,
        "description": cluster.description,
        "backend": cluster.backend,
        "scheduler_name": cluster.scheduler_name,
        "scheduler_args": json.dumps(scheduler_args),
    }


def test_admin_refuses_bad_arguments_with_field_messages(ui: Pages, as_admin: Client) -> None:
    url = reverse("admin:koordweb_cluster_change", args=[ui.cluster.pk])
    bad = {"NetworkTopology": {"bestFit": "yes"}, "JobPreemption": {"candidateLimit": 0}}
    response = as_admin.post(url, _form(ui, bad))
    assert response.status_code == 200  # the form again, with its errors
    html = response.content.decode()
    assert "NetworkTopology.bestFit: expected true or false" in html
    assert "JobPreemption.candidateLimit: expected at least 1 and at most 64" in html
    ui.cluster.refresh_from_db()
    assert ui.cluster.scheduler_args == {}
    good = {"NetworkTopology": {"bestFit": True}}
    assert as_admin.post(url, _form(ui, good)).status_code == 302
    ui.cluster.refresh_from_db()
    assert ui.cluster.scheduler_args == good


def test_topology_page_shows_the_profile_arguments(ui: Pages, as_admin: Client) -> None:
    page = as_admin.get(reverse("topology")).content.decode()
    assert "Scheduler profile: Koordinator's reference behaviour." in page
    ui.cluster.scheduler_args = {"NetworkTopology": {"bestFit": True, "parentFragmentation": False}}
    ui.cluster.save()
    page = as_admin.get(reverse("topology")).content.decode()
    assert "NetworkTopology bestFit=true, parentFragmentation=false." in page
