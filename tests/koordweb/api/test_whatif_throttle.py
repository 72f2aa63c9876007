"""Issue #36: what-if is bounded per tenant. Each answer runs a round's work on the live state, so
a user has a what-if budget (`whatif`) and a team another (`whatif_team`), besides the API's; a
what-if never plans more than the cluster's own round (the jobs the round backed off stay out)."""

from __future__ import annotations

from typing import Any

from koordweb.api.throttles import DEFAULT_RATES
from koordweb.engine import backoff
from koordweb.models import ElasticQuota
from tests.builders import UserFactory, simulated_round, submission, token_client

WHATIF = "/api/v1/whatif/"
NOWHERE = {"requests": {"cpu": "1"}, "node_selector": {"nowhere": "x"}}


def _rates(settings: Any, **rates: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            "user": "1000/min",
            "team": "1000/min",
            "anon": "9/min",
            **rates,
        },
    }


def test_the_defaults_bound_what_if_per_user_and_per_team():
    assert DEFAULT_RATES["whatif"] == "30/min" and DEFAULT_RATES["whatif_team"] == "120/min"


def test_a_users_what_ifs_past_the_limit_are_a_429_naming_it(world, alice_api, settings):
    _rates(settings, whatif="2/min", whatif_team="100/min")
    answers = [alice_api.post(WHATIF, submission(), format="json") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert "for what-if per user" in answers[2].json()["detail"]
    assert answers[2].has_header("Retry-After")
    # The rest of the API and another team's what-ifs are not held to it.
    assert alice_api.get("/api/v1/nodes/").status_code == 200
    bob = token_client(world.bob)
    assert bob.post(WHATIF, submission(quota="team-b"), format="json").status_code == 200


def test_a_team_shares_one_what_if_budget(world, alice_api, settings):
    _rates(settings, whatif="100/min", whatif_team="2/min")
    carol = UserFactory(username="carol")
    world.team_a.members.add(carol)
    carol_api = token_client(carol)
    assert alice_api.post(WHATIF, submission(), format="json").status_code == 200
    assert carol_api.post(WHATIF, submission(), format="json").status_code == 200
    refused = carol_api.post(WHATIF, submission(), format="json")
    assert refused.status_code == 429 and "for what-if per team" in refused.json()["detail"]


def test_a_what_if_leaves_out_what_the_round_backed_off(world, alice_api, monkeypatch):
    """Parked work the round no longer plans is not planned by every what-if either."""
    backoff.backoff_forget()
    # team-a (and its parent) at most 1 CPU: one parked job is all the demand the engine sees.
    ElasticQuota.objects.filter(pk__in=[world.team_a.pk, world.root.pk]).update(max={"cpu": 1000})
    for i in range(4):
        body = submission(name=f"parked-{i}", replicas=1, pod=NOWHERE, topology=None)
        assert alice_api.post("/api/v1/jobs/", body, format="json").status_code == 201
    for _ in range(3):  # 1 s of back-off after the first attempt, 2 s after the second
        outcome = simulated_round(world.cluster)
    metrics = outcome.round.metrics
    assert metrics["backoff_held_jobs"] == 3, metrics  # one kept for team-a's demand
    planned: list[int] = []
    from koordweb.engine import whatif

    real = whatif.plan_round

    def counting(snapshot: Any, profile: Any) -> Any:
        planned.append(len(snapshot.jobs))
        return real(snapshot, profile)

    monkeypatch.setattr(whatif, "plan_round", counting)
    assert alice_api.post(WHATIF, submission(), format="json").status_code == 200
    # the round's jobs (the one parked job kept in) and the hypothetical one
    assert planned == [len(outcome.snapshot.jobs) + 1]
    backoff.backoff_forget()
