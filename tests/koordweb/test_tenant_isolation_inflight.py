"""Issue #36: what-if is bounded per tenant at once, not only per minute. A what-if runs a round's
engine work on the live state, so a team may have at most `limits.WHATIF_IN_FLIGHT` of them
computing at the same time (KOORDWEB_WHATIF_IN_FLIGHT); another is a 429 naming the limit, and
other teams are not held to it."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import caches

from koordweb import limits
from koordweb.api.throttles import whatif_in_flight, whatif_in_flight_limit
from tests.builders import UserFactory, submission, teams, token_client

WHATIF = "/api/v1/whatif/"


@pytest.fixture
def world(db: Any) -> Any:
    return teams()


def test_the_default_bound_is_two_what_ifs_per_team():
    assert limits.WHATIF_IN_FLIGHT == 2 == whatif_in_flight_limit()


def test_a_team_with_its_limit_computing_gets_a_429_naming_it(world, settings):
    settings.KOORDWEB_WHATIF_IN_FLIGHT = 1
    carol = UserFactory(username="carol")
    world.team_a.members.add(carol)
    # A user's teams are remembered in the shared cache for a minute; the file cache outlives the
    # test databases, where user ids are reused, so forget what an earlier test remembered.
    caches["default"].delete_many([f"throttle:teams:{u.pk}" for u in (carol, world.alice)])
    carol_api, bob_api = token_client(carol), token_client(world.bob)
    with whatif_in_flight(world.alice):  # alice's what-if is computing
        refused = carol_api.post(WHATIF, submission(), format="json")
        assert refused.status_code == 429
        assert "What-ifs computing at once per team reached: at most 1" in refused.json()["detail"]
        assert refused.has_header("Retry-After")
        # another team's what-if is not held to team-a's bound
        assert bob_api.post(WHATIF, submission(quota="team-b"), format="json").status_code == 200
    # alice's answer given, the slot is back
    assert carol_api.post(WHATIF, submission(), format="json").status_code == 200


def test_a_what_if_that_fails_gives_its_slot_back(world, settings):
    settings.KOORDWEB_WHATIF_IN_FLIGHT = 1
    with pytest.raises(RuntimeError), whatif_in_flight(world.alice):
        raise RuntimeError("engine down")
    with whatif_in_flight(world.alice):
        pass  # not refused: the failed one gave its slot back


def test_admins_are_not_held_to_a_teams_bound(world, settings):
    settings.KOORDWEB_WHATIF_IN_FLIGHT = 1
    with whatif_in_flight(world.admin), whatif_in_flight(world.admin):
        pass
