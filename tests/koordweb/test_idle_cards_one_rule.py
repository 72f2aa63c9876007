"""One rule for "allocated but idle" cards: the devices page's count, its filter and the overview
agree, card by card (before, the count took a card with any idle holder and the filter a card
whose every holding job was idle on all its cards: a job with one busy and one idle card, or a
card shared by a busy and an idle job, was counted by one and not the other)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from koordweb.selectors.device_filters import CardFilter
from koordweb.selectors.devices import device_grid
from koordweb.selectors.gpu_usage import cards_busy, cards_idle_now
from koordweb.services.gpu_usage import gpu_samples_ingest
from tests import builders as f

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


@pytest.fixture
def sampled() -> Any:
    """gpu-1: card 0 busy and card 1 idle, both of one job; card 2 shared by a busy and an idle
    job; card 3 free."""
    node = f.NodeFactory(name="gpu-1")
    for minor in range(4):
        f.DeviceFactory(node=node, minor=minor)
    vision = f.QuotaFactory(cluster=node.cluster, name="vision")
    speech = f.QuotaFactory(cluster=node.cluster, name="speech")
    f.card_holder(vision, node, {0: 100, 1: 100}, "mixed")
    f.card_holder(vision, node, {2: 50}, "busy")
    f.card_holder(speech, node, {2: 30}, "idle")
    f.card_report(
        node,
        T0 + timedelta(seconds=50),
        {0: 90, 1: 0, 2: 40, 3: 0},
        {
            "vision/mixed-0": {0: 90, 1: 0},
            "vision/busy-0": {2: 40},
            "speech/idle-0": {2: 0},
        },
    )
    gpu_samples_ingest(
        cluster=node.cluster, now=T0 + timedelta(minutes=1), period_start=int(T0.timestamp())
    )
    node.cluster.refresh_from_db()
    return node.cluster


def test_a_card_is_idle_when_every_holder_held_it_idle(sampled: Any) -> None:
    assert cards_idle_now(sampled) == {("gpu-1", 1)}


def test_the_count_and_the_filter_name_the_same_cards(sampled: Any) -> None:
    idle = cards_idle_now(sampled)
    assert cards_busy(sampled).allocated_idle == 1
    grid = device_grid(sampled, filters=CardFilter(show="idle"), idle_cards=idle)
    assert grid.facets["show"]["idle"] == 1
    assert [(card.node, card.minor) for card in grid.cards] == [("gpu-1", 1)]
    everything = device_grid(sampled, idle_cards=idle)
    assert everything.facets["show"] == {"": 4, "idle": 1, "allocated": 3, "free": 1}
