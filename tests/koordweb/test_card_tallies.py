"""The cards counted for the overview (per model), the topology page (per node and kind) and the
device heatmap, from one read of the pods' device-allocated annotations (issue #34).

The three pages count a held card by different rules, and these tests keep each one as it is:
the overview sums every share on every card of a model, unhealthy or over-committed cards too;
the topology page counts healthy cards only, each at most whole, and any holding makes a card
not free; the heatmap shows every card, each share capped at a whole card, any holding making it
allocated.
"""

from __future__ import annotations

import json

import pytest

from koordweb.models import Cluster, Node
from koordweb.selectors.card_tallies import device_counts, device_type_usage, node_card_tallies
from koordweb.selectors.devices import CardFilter, device_grid
from koordweb.selectors.gpu_usage import unhealthy_cards
from tests import builders as f
from tests.builders.devices import DEVICE_ALLOCATED

pytestmark = pytest.mark.django_db


def _holder(node: Node, name: str, cards: dict[int, dict[str, str]]) -> None:
    """A running one-pod job on `node` holding, per card minor, these resources of it."""
    quota = f.QuotaFactory(cluster=node.cluster, name=f"team-{name}")
    entries = [{"minor": minor, "resources": held} for minor, held in cards.items()]
    f.gang(
        node.cluster,
        name,
        quota=quota,
        namespace=quota.name,
        nodes=[node],
        requests={"cpu": 4000, "huawei.com/npu": 1},
        annotations={DEVICE_ALLOCATED: json.dumps({"gpu": entries})},
    )


@pytest.fixture
def ascend() -> Cluster:
    """An Ascend node of four cards, card 3 unhealthy, and an NVIDIA node no pod holds.

    Card 0 is held whole; card 1 in AI cores only (no core or memory share: 0% of the card);
    card 2 by two pods, 100% and 60% (over-committed); unhealthy card 3 whole."""
    cluster = f.ClusterFactory(name="tallies")
    npu = f.gpu_node(
        cluster,
        "npu-1",
        block="b1",
        cards=4,
        vendor="huawei",
        model="Ascend-910B3",
        resource="huawei.com/npu",
        unhealthy=(3,),
    )
    f.gpu_node(cluster, "gpu-1", block="b2", cards=2)
    whole = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"}
    _holder(npu, "whole", {0: whole, 3: whole})
    _holder(npu, "cores", {1: {"huawei.com/npu-core": "4"}})
    _holder(npu, "first", {2: whole})
    _holder(npu, "second", {2: {"koordinator.sh/gpu-core": "60"}})
    return cluster


def test_the_overview_sums_every_share_unhealthy_and_over_committed_cards_too(
    ascend: Cluster,
) -> None:
    rows = {use.model: use for use in device_type_usage(ascend)}
    assert set(rows) == {"Huawei Ascend 910B3", "NVIDIA H100"}
    npu = rows["Huawei Ascend 910B3"]
    # card 0: 1, card 1: 0, card 2: 1 + 0.6, unhealthy card 3: 1
    assert (npu.total, npu.healthy, npu.allocated) == (4, 3, 3.6)
    gpu = rows["NVIDIA H100"]
    assert (gpu.total, gpu.healthy, gpu.allocated) == (2, 2, 0.0)


def test_the_topology_counts_healthy_cards_each_at_most_whole_and_any_holding_as_not_free(
    ascend: Cluster,
) -> None:
    tallies = node_card_tallies(ascend)
    npu = tallies["npu-1"]["huawei.com/npu"]
    # card 0: 1, card 1: a holding without a share counts 1%, card 2: capped at 1; card 3 is
    # unhealthy and left out
    assert (npu.cards, round(npu.held, 2), npu.free) == (3, 2.01, 0)
    assert set(tallies["npu-1"]) == {"huawei.com/npu"}
    gpu = tallies["gpu-1"]["nvidia.com/gpu"]
    assert (gpu.cards, gpu.held, gpu.free) == (2, 0.0, 2)


def test_the_heatmap_shows_every_held_card_allocated_each_share_at_most_whole(
    ascend: Cluster,
) -> None:
    grid = device_grid(ascend, filters=CardFilter(vendor="huawei"))
    cards = {card.minor: card for card in grid.cards}
    assert [cards[m].core_used for m in range(4)] == [100, 0, 100, 100]
    assert [cards[m].healthy for m in range(4)] == [True, True, True, False]
    assert cards[1].uses[0].ai_cores == 4
    assert grid.facets["show"] == {"": 4, "allocated": 4}
    everything = device_grid(ascend)
    assert everything.facets["show"] == {"": 6, "allocated": 4, "free": 2}


def test_the_cluster_counts_and_the_unhealthy_list_agree(ascend: Cluster) -> None:
    assert device_counts(ascend) == (6, 1, 2)
    assert unhealthy_cards(ascend) == (1, [("npu-1", 3, "Ascend-910B3")])
