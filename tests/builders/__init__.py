"""The one test world builder: factory_boy factories for every row a test needs, the shapes
tests share (a spine/block topology, a GPU node with its cards, a gang of pods) and the named
worlds built from them, one module per concept:

- `accounts`: users and API clients; `cluster`: clusters, nodes, priority classes, quotas;
- `topology`: layers and the spine > block > node shape; `devices`: GPU nodes, cards, usage;
- `jobs`: jobs, pods, gangs, an API submission; `rounds`: rounds, decisions, preemptions;
- worlds: `teams` (two teams), `pages` (the HTML pages'), `tenants` (the security tests'),
  `busy` (a busy superpod), `load` (the load tests').

A test builds the rows it reads; none depends on the demo (`koordweb.services.demo`), which only
the demo's own tests seed. Everything is importable from here: `from tests.builders import gang`.
"""

from __future__ import annotations

from tests.builders.accounts import UserFactory, token_client
from tests.builders.busy import Busy, busy_cluster, nlp_submits, superpod, urgent_spine_gang
from tests.builders.cluster import (
    GIB,
    ClusterFactory,
    NodeFactory,
    PriorityClassFactory,
    QuotaFactory,
)
from tests.builders.devices import (
    DEVICE_ALLOCATED,
    DeviceFactory,
    card_allocation,
    card_holder,
    card_report,
    gpu_node,
    whole_cards,
)
from tests.builders.jobs import JobFactory, PodFactory, gang, submission
from tests.builders.load import LoadWorld, load_world
from tests.builders.pages import Pages, pages_world
from tests.builders.rounds import (
    DecisionFactory,
    PreemptionFactory,
    RoundFactory,
    VictimFactory,
    simulated_round,
)
from tests.builders.teams import FOUR_BLOCKS, Teams, teams
from tests.builders.tenants import B_SECRET, Tenant, Tenants, tenants
from tests.builders.topology import BLOCK, SPINE, LayerFactory, topology

__all__ = [
    "BLOCK",
    "B_SECRET",
    "DEVICE_ALLOCATED",
    "FOUR_BLOCKS",
    "GIB",
    "SPINE",
    "Busy",
    "ClusterFactory",
    "DecisionFactory",
    "DeviceFactory",
    "JobFactory",
    "LayerFactory",
    "LoadWorld",
    "NodeFactory",
    "Pages",
    "PodFactory",
    "PreemptionFactory",
    "PriorityClassFactory",
    "QuotaFactory",
    "RoundFactory",
    "Teams",
    "Tenant",
    "Tenants",
    "UserFactory",
    "VictimFactory",
    "busy_cluster",
    "card_allocation",
    "card_holder",
    "card_report",
    "gang",
    "gpu_node",
    "load_world",
    "nlp_submits",
    "pages_world",
    "simulated_round",
    "submission",
    "superpod",
    "teams",
    "tenants",
    "token_client",
    "topology",
    "urgent_spine_gang",
    "whole_cards",
]
