"""The simulated backend's job page lists the Events a real cluster would hold (issue #33,
item 1): Scheduled for placed pods, FailedScheduling with the "0/N nodes are available" summary
for a job that waits, from the round's Decision rows."""

from __future__ import annotations

from django.urls import reverse

from koordweb.models import Job, JobState
from koordweb.tasks import run_round
from tests.builders import busy_cluster


def test_the_job_page_lists_the_events_kubectl_would_show(db, settings, admin_client):
    settings.KOORDWEB_CLUSTER = "default"
    cluster = busy_cluster().cluster
    waiting = Job.objects.filter(cluster=cluster, state=JobState.PENDING).first()
    waiting.topology_spec = {"gatherStrategy": [{"layer": "NoSuchLayer", "strategy": "MustGather"}]}
    waiting.save(update_fields=["topology_spec"])
    run_round(cluster.id)
    placed = Job.objects.filter(cluster=cluster, state=JobState.SCHEDULED).first()
    pod = placed.pods.first()
    html = admin_client.get(reverse("job-detail", args=[placed.pk])).content.decode()
    assert "<h2>Events</h2>" in html
    assert f"Successfully assigned {pod.namespace}/{pod.name} to {pod.node.name}" in html
    html = admin_client.get(reverse("job-detail", args=[waiting.pk])).content.decode()
    assert "FailedScheduling" in html
    assert f"0/{cluster.nodes.count()} nodes are available: " in html
