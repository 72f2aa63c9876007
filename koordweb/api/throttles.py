"""Rate limits per user (whichever of their tokens or their session), per team, and per client
address when anonymous.

A user may hold several tokens, so counting per token let one user multiply their budget; a team
of many users shares one budget besides, so a team cannot take the API from the others. Each
limit is a counter per fixed window in the shared cache (settings.CACHES["default"]), created with
`add` and advanced with `incr`: one atomic step on Redis and in the in-memory cache, so concurrent
requests cannot lose a count as DRF's read-then-write history did (the file cache, a single
machine's fallback, is not atomic). The cache is looked up at call time so a test that swaps the
backend is honoured; a 429 says which limit was reached and when to retry.

What-if answers (api/views/whatif.py) each run a round's work on the live state, so they have
budgets of their own besides: `whatif` per user and `whatif_team` per team, and a team may have
at most `limits.WHATIF_IN_FLIGHT` of them computing at once (`whatif_in_flight`: a counter per
team in the cache, taken for the computation and given back after it; a slot a dead process held
is freed when the counter expires, `IN_FLIGHT_SECONDS` after it was made).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.cache import caches
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from koordweb.selectors.tenancy import quotas_of_member, user_is_admin

# Used when settings' DEFAULT_THROTTLE_RATES does not name the scope.
DEFAULT_RATES = {
    "user": "1200/min",
    "team": "3600/min",
    "anon": "60/min",
    "whatif": "30/min",
    "whatif_team": "120/min",
}
TEAMS_REMEMBERED_SECONDS = 60
IN_FLIGHT_SECONDS = 120
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'1200/min' -> (1200, 60): requests allowed per window of that many seconds."""
    count, period = rate.split("/")
    return int(count), _PERIODS[period[0]]


def rate_of(scope: str) -> tuple[int, int] | None:
    rates: dict[str, Any] = {**DEFAULT_RATES, **dict(api_settings.DEFAULT_THROTTLE_RATES)}
    rate = rates.get(scope)
    return parse_rate(rate) if isinstance(rate, str) else None


def window_count(key: str, period: int, now: float) -> tuple[int, int]:
    """Count one more request under `key` in the current window of `period` seconds; returns
    (the count so far, seconds until the window ends)."""
    cache = caches["default"]
    window = int(now // period)
    counter = f"throttle:{key}:{period}:{window}"
    cache.add(counter, 0, timeout=period + 1)
    try:
        count = cache.incr(counter)
    except ValueError:  # expired between add and incr: this request opens the next window
        cache.add(counter, 1, timeout=period + 1)
        count = 1
    return int(count), max(1, int((window + 1) * period - now))


class CountingThrottle(BaseThrottle):
    """One limit: `idents` says whose counters a request advances; any over its rate -> 429."""

    scope = ""
    what = ""

    def idents(self, request: Request) -> list[str]:
        raise NotImplementedError

    def allow_request(self, request: Request, view: Any) -> bool:
        rate = rate_of(self.scope)
        if rate is None:
            return True
        allowed, period = rate
        now = time.time()
        for ident in self.idents(request):
            count, wait = window_count(f"{self.scope}:{ident}", period, now)
            if count > allowed:
                raise exceptions.Throttled(
                    wait,
                    detail=f"Rate limit {self.what} reached: {allowed} requests per {period} s; "
                    "0 left in this window.",
                )
        return True


class UserRateThrottle(CountingThrottle):
    """`user` rate: all of a user's requests together, whichever token or session sent them."""

    scope = "user"
    what = "per user"

    def idents(self, request: Request) -> list[str]:
        user = request.user
        return [f"user:{user.pk}"] if user and user.is_authenticated else []


class TeamRateThrottle(CountingThrottle):
    """`team` rate: every member's requests count against each team (quota) they belong to;
    admins belong to no team here. A user's teams are remembered in the cache for a minute, so a
    request costs no query for them."""

    scope = "team"
    what = "per team"

    def idents(self, request: Request) -> list[str]:
        return team_idents(request.user)


def team_idents(user: Any) -> list[str]:
    """The counters of a user's teams (quotas); none for admins and anonymous callers. A user's
    teams are remembered in the cache for a minute, so a request costs no query for them."""
    if not (user and user.is_authenticated) or user_is_admin(user):
        return []
    cache = caches["default"]
    key = f"throttle:teams:{user.pk}"
    ids = cache.get(key)
    if not isinstance(ids, list):
        ids = list(quotas_of_member(user=user).values_list("pk", flat=True).order_by("pk"))
        cache.set(key, ids, timeout=TEAMS_REMEMBERED_SECONDS)
    return [f"quota:{pk}" for pk in ids]


class AnonymousRateThrottle(CountingThrottle):
    """`anon` rate for callers without credentials, per client address."""

    scope = "anon"
    what = "per client address"

    def idents(self, request: Request) -> list[str]:
        if request.user and request.user.is_authenticated:
            return []
        return [f"address:{self.get_ident(request)}"]


class WhatIfRateThrottle(UserRateThrottle):
    """`whatif` rate: a user's what-if computations (each one a round's engine work)."""

    scope = "whatif"
    what = "for what-if per user"


class WhatIfTeamRateThrottle(TeamRateThrottle):
    """`whatif_team` rate: what-if computations of every member of a team together."""

    scope = "whatif_team"
    what = "for what-if per team"


API_THROTTLES = [UserRateThrottle, TeamRateThrottle, AnonymousRateThrottle]
WHATIF_THROTTLES = [*API_THROTTLES, WhatIfRateThrottle, WhatIfTeamRateThrottle]


def whatif_in_flight_limit() -> int:
    """What-ifs a team may have computing at once (KOORDWEB_WHATIF_IN_FLIGHT, else the limit)."""
    return int(settings.KOORDWEB_WHATIF_IN_FLIGHT)


@contextlib.contextmanager
def whatif_in_flight(user: Any) -> Iterator[None]:
    """Hold one what-if slot of each of the user's teams while a what-if computes; a 429 when a
    team has its limit computing already (admins, in no team here, are not held to it)."""
    limit = whatif_in_flight_limit()
    cache = caches["default"]
    taken: list[str] = []
    try:
        for ident in team_idents(user):
            key = f"whatif:in-flight:{ident}"
            cache.add(key, 0, timeout=IN_FLIGHT_SECONDS)
            try:
                count = cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.add(key, 1, timeout=IN_FLIGHT_SECONDS)
                count = 1
            taken.append(key)
            if count > limit:
                raise exceptions.Throttled(
                    1,
                    detail=f"What-ifs computing at once per team reached: at most {limit}; "
                    "0 left until one of them is answered.",
                )
        yield
    finally:
        for key in taken:
            with contextlib.suppress(ValueError):  # expired meanwhile: nothing to give back
                cache.decr(key)
