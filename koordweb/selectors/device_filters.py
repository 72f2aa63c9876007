"""The devices page's filters: which cards a choice shows, and how many cards each choice of a
filter would show with the other filters as they are (the counts beside the choices).

Pure, no ORM: `selectors.devices.device_grid` reads the cards and their holders and reduces
each card to its traits here (model, holding teams, state). Thousands of cards are matched and
counted per distinct kind of card, not one by one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

# What the devices page's "cards" filter shows: every card, or those in one state.
CARD_STATES = {
    "allocated": "allocated",
    "idle": "allocated but idle",
    "free": "free",
}


@dataclass(frozen=True)
class CardFilter:
    """The devices page's filters. `model` is the Device CR's model ("H800"), `team` the quota
    of a job holding the card, `show` a key of CARD_STATES ("" every card)."""

    vendor: str = ""
    group: str = ""
    model: str = ""
    team: str = ""
    show: str = ""


class CardHolder(Protocol):
    """What the filters read of one pod holding a share of a card."""

    @property
    def job_id(self) -> int | None: ...

    @property
    def team(self) -> str: ...


class CardTraits(NamedTuple):
    """What the filters ask of one card: its model, the teams holding it, its state (a tuple:
    thousands of cards are counted by it)."""

    model: str
    teams: frozenset[str]
    state: str  # "free", "allocated" or "idle" (allocated, every holder idle)


def card_state(held: Sequence[CardHolder], idle: bool) -> str:
    """A card's state: "free" when no pod holds any part of it, "idle" when it is held and
    every holder held it idle in the last sampled minute (`gpu_usage.cards_idle_now`), else
    "allocated"."""
    if not held:
        return "free"
    return "idle" if idle else "allocated"


def card_traits(
    model: str,
    held: Sequence[CardHolder],
    idle: bool,
    teams: set[str] | None,
) -> CardTraits:
    """A card's traits; `teams` the teams a viewer may filter and count by (None: all)."""
    named = frozenset(use.team for use in held if use.team and (teams is None or use.team in teams))
    return CardTraits(model, named, card_state(held, idle))


def card_matches(traits: CardTraits, filters: CardFilter, skip: str = "") -> bool:
    """Whether a card of these traits passes the filters (but the one named by `skip`)."""
    if skip != "model" and filters.model and traits.model != filters.model:
        return False
    if skip != "team" and filters.team and filters.team not in traits.teams:
        return False
    if skip != "show" and filters.show:
        # an idle card is allocated too
        wanted = {"allocated": ("allocated", "idle")}.get(filters.show, (filters.show,))
        if traits.state not in wanted:
            return False
    return True


def filter_facets(
    kinds: Mapping[CardTraits, int], filters: CardFilter
) -> dict[str, dict[str, int]]:
    """Each filter's choices counted with the other filters applied (a faceted search), over
    the distinct kinds of card and how many cards are of each: {"show": {"idle": 3, ...},
    "team": {"team-a": 16}, "model": {"H100": 40}}, "" counting every card of the filter."""
    facets: dict[str, dict[str, int]] = {"show": {}, "team": {}, "model": {}}
    for card, n in kinds.items():
        if card_matches(card, filters, skip="model"):
            for model in ("", card.model):
                facets["model"][model] = facets["model"].get(model, 0) + n
        if card_matches(card, filters, skip="team"):
            for team in ("", *card.teams):
                facets["team"][team] = facets["team"].get(team, 0) + n
        if card_matches(card, filters, skip="show"):
            states = ("", card.state, "allocated") if card.state == "idle" else ("", card.state)
            for state in states:
                facets["show"][state] = facets["show"].get(state, 0) + n
    return facets
