"""explain/ names the jobs a counterfactual would evict only when the caller may see them."""

from __future__ import annotations

from django.utils import timezone

from koordweb.models import Decision, Round
from tests import builders as f


def test_a_tenant_sees_other_tenants_victims_counted_not_named(alice_api, admin_api, world):
    mine = f.JobFactory(cluster=world.cluster, quota=world.team_a, name="mine")
    f.JobFactory(cluster=world.cluster, quota=world.team_a, name="my-batch", namespace="default")
    f.JobFactory(cluster=world.cluster, quota=world.team_b, name="their-batch", namespace="default")
    rnd = Round.objects.create(cluster=world.cluster, started_at=timezone.now())
    Decision.objects.create(
        round=rnd,
        job=mine,
        outcome=Decision.Outcome.UNSCHEDULABLE,
        reason="no candidate topology nodes can accommodate job",
        details={
            "counterfactual": {
                "evict_jobs": ["default/my-batch", "default/their-batch"],
                "fits_in": "BlockLayer/b1",
            }
        },
        created_at=timezone.now(),
    )
    url = f"/api/v1/jobs/{mine.pk}/explain/"
    seen = alice_api.get(url).json()["why_pending"]["counterfactual"]
    assert seen["evict_jobs"] == ["default/my-batch"]
    assert seen["other_tenants_jobs"] == 1
    assert "their-batch" not in alice_api.get(url).content.decode()
    full = admin_api.get(url).json()["why_pending"]["counterfactual"]
    assert full["evict_jobs"] == ["default/my-batch", "default/their-batch"]
