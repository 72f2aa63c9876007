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


def test_a_preemption_explained_gives_the_rule_and_hides_another_teams_reason(
    alice_api, bob_api, admin_api, world
):
    # bob's quota-reclaiming job took back what alice's batch job had borrowed.
    victim = f.JobFactory(cluster=world.cluster, quota=world.team_a, name="borrower")
    preemptor = f.JobFactory(cluster=world.cluster, quota=world.team_b, name="mine", priority=10)
    reason = "Insufficient quotas, quotaName: team-b, exceedDimensions: [nvidia.com/gpu]"
    cost = {"rule": "QuotaReclaim", "preemptor_priority": 5000, "highest_victim_priority": 7000}
    # recorded without the engine's cause (the row's cost does not carry it): the rule only, the
    # reason (in the engine's words) in the answer's `reason` field for the reader allowed it
    preemption = f.PreemptionFactory(preemptor=preemptor, reason=reason, cost=cost)
    f.VictimFactory(preemption=preemption, job=victim)
    for_admin = admin_api.get(f"/api/v1/jobs/{victim.pk}/explain/").json()["why_preempted"][0]
    assert for_admin["rule"] == "QuotaReclaim"
    assert for_admin["preemptor"] == "default/mine"
    assert for_admin["preemptor_priority"] == 5000  # as recorded, not the job's priority now
    assert for_admin["reason"] == reason
    assert for_admin["sentence"] == (
        "Took back quota that other quotas had borrowed beyond their guaranteed minimum: the "
        "preemptor's quota is still within its own minimum. Without that it did not fit."
    )
    # alice's job was the victim of bob's: the rule, not bob's job, nor its quota.
    response = alice_api.get(f"/api/v1/jobs/{victim.pk}/explain/")
    for_alice = response.json()["why_preempted"][0]
    assert for_alice["rule"] == "QuotaReclaim"
    assert for_alice["preemptor"] is None and for_alice["reason"] == ""
    assert for_alice["sentence"] == for_admin["sentence"].partition(" Without")[0]
    assert "team-b" not in response.content.decode()


def test_a_preemption_recorded_before_the_rule_was_data_has_no_rule(alice_api, world):
    victim = f.JobFactory(cluster=world.cluster, quota=world.team_a, name="old")
    preemptor = f.JobFactory(cluster=world.cluster, quota=world.team_a, name="new", priority=9)
    preemption = f.PreemptionFactory(preemptor=preemptor, reason="the block was needed", cost={})
    f.VictimFactory(preemption=preemption, job=victim)
    explained = alice_api.get(f"/api/v1/jobs/{victim.pk}/explain/").json()["why_preempted"][0]
    assert explained["rule"] is None
    assert explained["preemptor_priority"] == 9
    assert explained["sentence"] == "Evicted to make room for it."
    assert explained["reason"] == "the block was needed"  # as recorded, in its own field
