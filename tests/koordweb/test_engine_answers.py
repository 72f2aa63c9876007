"""The web layer words what the engine decided and recomputes nothing: a preemption records the
rule the engine names, as data, the runtime quota is the engine's, and an enabled
out-of-tree plugin travels through the scheduler ConfigMap and back."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from koordweb.engine.records import _preemption_rule, quota_runtime
from koordweb.manifests.scheduler_config import read_scheduler_config, scheduler_config_doc
from scheduler.result import PreemptionRecord, RoundResult
from tests.plugin_example import EXAMPLE_DIR


def _record(rule: str, highest: int) -> PreemptionRecord:
    cost = {"highest_victim_priority": highest}
    return PreemptionRecord("ml/job", ("ml/low",), ("ml/low-1",), {}, "why", cost, rule)


@pytest.mark.parametrize(
    ("rule", "highest"),
    [
        ("LowerPriority", 5),
        ("InQuota", 5),
        # the engine's rule decides, not the victim's priority: 50 > 10 and still the rule says
        ("QuotaReclaim", 50),
        ("LowerPriority", 50),
    ],
)
def test_the_recorded_rule_is_the_engines(rule: str, highest: int) -> None:
    assert _preemption_rule(_record(rule, highest), 10) == {"rule": rule, "preemptor_priority": 10}


def test_the_recorded_runtime_quota_is_the_engines() -> None:
    runtime = {"team-a": {"cpu": 8000}, "team-b": {"nvidia.com/gpu": 3}}
    result = RoundResult({}, (), {}, {}, runtime_quota=runtime)
    assert quota_runtime(result) == runtime
    assert quota_runtime(RoundResult({}, (), {}, {})) == {}


def test_an_enabled_plugin_and_its_args_travel_through_the_configmap(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    settings.KOORDWEB_SCHEDULER_PLUGINS = {
        "PreferLabel": "prefer_label_plugin.prefer_label:PreferLabel"
    }
    args = {
        "enabledPlugins": ["PreferLabel"],
        "PreferLabel": {"label": "disk", "value": "ssd"},
        "NetworkTopology": {"bestFit": True},
        "DeviceShare": {"scoring": "MostAllocated"},
    }
    doc = scheduler_config_doc(args, "koordweb")
    assert read_scheduler_config(doc["data"]) == (args, [])


def test_a_kube_scheduler_configuration_enables_a_registered_plugin(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    settings.KOORDWEB_SCHEDULER_PLUGINS = {
        "PreferLabel": "prefer_label_plugin.prefer_label:PreferLabel"
    }
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "koordweb",
                "plugins": {"score": {"enabled": [{"name": "PreferLabel", "weight": 1}]}},
                "pluginConfig": [
                    {"name": "PreferLabel", "args": {"kind": "PreferLabelArgs", "label": "disk"}}
                ],
            }
        ],
    }
    args, unsupported = read_scheduler_config({"koord-scheduler-config": yaml.safe_dump(config)})
    assert args == {"enabledPlugins": ["PreferLabel"], "PreferLabel": {"label": "disk"}}
    assert unsupported == []
