"""Scheduler profiles: which plugins a round runs, in what order, with which arguments.

A `Profile` names plugins (`PluginSpec(name, args)`); `REGISTRY` maps a plugin name to
"module:Class". Plugins owned by other modules (devices, load-aware) are imported lazily, and the
default profile includes them only when their module is importable, so the core runs without them.
Arguments are plain JSON-like values, e.g. NetworkTopology `{"parentFragmentation": true}` or
DeviceShare `{"scoring": "MostAllocated"}`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REGISTRY: dict[str, str] = {
    "PrioritySort": "scheduler.plugins.priority:PrioritySort",
    "NodeUnschedulable": "scheduler.plugins.node_constraints:NodeUnschedulable",
    "NodeAffinity": "scheduler.plugins.node_constraints:NodeAffinity",
    "TaintToleration": "scheduler.plugins.node_constraints:TaintToleration",
    "NodeResourcesFit": "scheduler.plugins.resources:NodeResourcesFit",
    "Coscheduling": "scheduler.plugins.gang:Coscheduling",
    "ElasticQuota": "scheduler.plugins.quota:ElasticQuota",
    "NetworkTopology": "scheduler.plugins.topology:NetworkTopology",
    "JobPreemption": "scheduler.plugins.preemption:JobPreemption",
    "DeviceShare": "scheduler.plugins.devices:DeviceShare",
    "LoadAware": "scheduler.plugins.loadaware:LoadAware",
}

# Order matters where it shows: PreFilter runs gang, topology validation, then quota admission.
CORE_PLUGINS = (
    "PrioritySort",
    "NodeUnschedulable",
    "NodeAffinity",
    "TaintToleration",
    "NodeResourcesFit",
    "Coscheduling",
    "NetworkTopology",
    "ElasticQuota",
    "JobPreemption",
)
OPTIONAL_PLUGINS = ("DeviceShare", "LoadAware")


@dataclass(frozen=True)
class PluginSpec:
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    name: str = "default"
    plugins: tuple[PluginSpec, ...] = ()

    @staticmethod
    def default(**args: Mapping[str, Any]) -> Profile:
        """Koordinator's reference behaviour; keyword arguments give per-plugin args by name."""
        names = list(CORE_PLUGINS)
        for optional in OPTIONAL_PLUGINS:
            if _importable(optional):
                names.insert(names.index("Coscheduling"), optional)
        return Profile("default", tuple(PluginSpec(n, dict(args.get(n, {}))) for n in names))

    def with_args(self, name: str, **args: Any) -> Profile:
        """A copy with `name`'s arguments updated (the plugin is added if missing)."""
        specs = list(self.plugins)
        for i, spec in enumerate(specs):
            if spec.name == name:
                specs[i] = PluginSpec(name, {**spec.args, **args})
                break
        else:
            specs.append(PluginSpec(name, args))
        return Profile(self.name, tuple(specs))

    def without(self, *names: str) -> Profile:
        return Profile(self.name, tuple(s for s in self.plugins if s.name not in names))

    def build(self) -> list[Any]:
        return [load_plugin(spec) for spec in self.plugins]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "plugins": [{"name": s.name, "args": dict(s.args)} for s in self.plugins],
        }


def load_plugin(spec: PluginSpec) -> Any:
    target = REGISTRY.get(spec.name)
    if target is None:
        raise ValueError(f"unknown plugin {spec.name!r}; known: {', '.join(sorted(REGISTRY))}")
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    return cls(spec.args)


def _importable(name: str) -> bool:
    module_name, _, attr = REGISTRY[name].partition(":")
    try:
        return hasattr(importlib.import_module(module_name), attr)
    except ImportError:
        return False
