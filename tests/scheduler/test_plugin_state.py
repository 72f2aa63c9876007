"""Typed plugin state (`StateKey`, `CycleState.read` / `get_or_create` / `write`) and plugin
arguments read with their declared defaults (`PluginArgs`)."""

from __future__ import annotations

import pytest

from scheduler.cycle import Framework
from scheduler.framework import Arg
from scheduler.plugin_args import PluginArgs
from scheduler.plugins.loadaware import LoadAware
from scheduler.plugins.quota import QUOTA_BOOK
from scheduler.plugins.topology import NetworkTopology
from scheduler.profile import Profile
from scheduler.state import CycleState
from scheduler.state_keys import StateKey
from tests.scheduler.builders import cluster, gang, node


def small_state() -> CycleState:
    c = cluster().node(node("n1").cpu(8), node("n2").cpu(8))
    return CycleState(c.submit(gang("ml/g", pods=2).cpu(1)).snapshot())


def test_a_key_makes_its_data_once_and_two_keys_of_one_name_are_apart() -> None:
    made: list[int] = []

    def count_nodes(state: CycleState) -> int:
        made.append(1)
        return len(state.nodes)

    nodes = StateKey("Test/nodes", count_nodes)
    twin = StateKey("Test/nodes", lambda state: -1)
    state = small_state()
    assert state.read(nodes) is None
    assert state.get_or_create(nodes) == 2
    assert state.get_or_create(nodes) == 2 and len(made) == 1
    assert state.get_or_create(twin) == -1 and state.read(nodes) == 2
    state.write(nodes, 5)
    assert state.read(nodes) == 5


def test_a_key_without_factory_is_read_after_setup_wrote_it() -> None:
    state = small_state()
    with pytest.raises(LookupError):
        state.get_or_create(QUOTA_BOOK)
    assert state.read(QUOTA_BOOK) is None  # no quotas: the quota plugin's Setup keeps nothing


def test_framework_caches_are_not_plugin_data() -> None:
    state = small_state()
    framework = Framework(Profile.default())
    framework.start(state)
    job = state.jobs["ml/g"]
    framework.offer_slots(state, job, state.pending_pods(job))
    assert state.cache.slot_memo is not None and state.cache.masks
    assert state.plugin_data == {}  # every in-tree plugin keeps its data under a typed key


def test_arguments_read_their_declared_defaults_unless_given() -> None:
    declared = {
        "on": Arg("bool", default=True),
        "window": Arg("duration", default="5m"),
        "limits": Arg("per_resource", default={"cpu": 65}),
        "optional": Arg("int"),
    }
    defaults = PluginArgs(declared, {})
    assert defaults.flag("on") and defaults.seconds("window") == 300
    assert defaults.amounts("limits") == {"cpu": 65} and defaults.get("optional") is None
    given = PluginArgs(declared, {"on": False, "window": "0s", "limits": {}, "optional": 3})
    assert not given.flag("on") and given.seconds("window") == 0
    assert given.amounts("limits") == {"cpu": 65}  # an empty map is the default map
    assert given.integer("optional") == 3
    assert dict(given) == {"on": False, "window": "0s", "limits": {}, "optional": 3}


def test_a_profile_builds_plugins_with_defaulted_arguments() -> None:
    profile = Profile.default().with_args("NetworkTopology", bestFit=False)
    framework = Framework(profile)
    topology = framework.plugin("NetworkTopology")
    assert isinstance(topology, NetworkTopology)
    assert topology.options.best_fit is False and topology.options.pack_parents is True
    load = framework.plugin("LoadAware")
    assert isinstance(load, LoadAware)
    assert load.thresholds == {"cpu": 65, "memory": 95} and load.expiration == 180.0
