"""The preemptions API tells a tenant what another team's preemption did to it, not why.

Why another team's job did not fit names that team's quota: a tenant gets the rule (in `cost`)
and the amounts, and sees only its own victims.
"""

from __future__ import annotations

import pytest

from tests.builders import VictimFactory, pages_world, token_client

pytestmark = pytest.mark.django_db

V1 = "/api/v1/preemptions/"


def test_victim_tenant_sees_no_reason_and_no_other_teams_victims() -> None:
    world = pages_world()
    # A second victim of the same preemption, of the preemptor's own team.
    VictimFactory(preemption=world.preemption, job=world.running, pods=["default/train-a-9"])
    as_bob = token_client(world.bob).get(f"{V1}{world.preemption.pk}/").json()
    assert as_bob["reason"] == ""
    assert as_bob["preemptor"]["name"] is None
    assert [v["job_name"] for v in as_bob["victims"]] == [world.preempted.gang_id]

    as_alice = token_client(world.alice).get(f"{V1}{world.preemption.pk}/").json()
    assert as_alice["reason"] == "train-a needs block b1"  # her own job's preemption

    as_admin = token_client(world.admin).get(f"{V1}{world.preemption.pk}/").json()
    assert as_admin["reason"] == "train-a needs block b1"
    assert len(as_admin["victims"]) == 2


def test_the_preemptors_cause_in_the_cost_is_hidden_with_its_reason() -> None:
    # The cost keeps why the preemptor did not fit (its cause names its quota): a tenant of the
    # victim's team gets the cost's amounts and rule, not the cause, on every door that shows it.
    world = pages_world()
    cause = {"code": "QuotaInsufficient", "plugin": "ElasticQuota", "values": {"quota": "team-a"}}
    world.preemption.cost = {**world.preemption.cost, "rule": "LowerPriority", "cause": cause}
    world.preemption.save(update_fields=["cost"])
    bob = token_client(world.bob)
    as_bob = bob.get(f"{V1}{world.preemption.pk}/").json()
    assert "cause" not in as_bob["cost"] and as_bob["cost"]["rule"] == "LowerPriority"
    explained = bob.get(f"/api/v1/jobs/{world.preempted.pk}/explain/").json()["why_preempted"]
    assert explained and all("cause" not in row["cost"] for row in explained)
    as_alice = token_client(world.alice).get(f"{V1}{world.preemption.pk}/").json()
    assert as_alice["cost"]["cause"] == cause  # her own job's preemption
