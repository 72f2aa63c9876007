"""Scheduler profiles: which plugins a round runs, in what order, with which arguments.

A `Profile` names plugins (`PluginSpec(name, args)`); `REGISTRY` maps a plugin name to
"module:Class". Plugins owned by other modules (devices, load-aware) are imported lazily, and the
default profile includes them only when their module is importable, so the core runs without them.
Arguments are plain JSON-like values, e.g. NetworkTopology `{"parentFragmentation": true}` or
DeviceShare `{"scoring": "MostAllocated"}`; each plugin declares the ones it takes (`arguments`),
and `Profile.configured` / `check_args` hold a configuration to them.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.framework import Arg

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

    @staticmethod
    def configured(config: Mapping[str, Any]) -> Profile:
        """The default profile with per-plugin arguments `{plugin: {argument: value}}` (a
        cluster's scheduler configuration); raises `ProfileError` naming every bad entry."""
        problems = check_args(config)
        if problems:
            raise ProfileError(problems)
        return Profile.default(**config)

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


class ProfileError(ValueError):
    """Bad plugin arguments: `problems` maps `Plugin` or `Plugin.argument` to what is wrong."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        super().__init__("; ".join(problem_lines(self.problems)))


def problem_lines(problems: Mapping[str, str]) -> list[str]:
    """`check_args` problems as sorted lines, `Plugin.argument: what is wrong`."""
    return [f"{where}: {what}" if where else what for where, what in sorted(problems.items())]


def configurable_arguments() -> dict[str, Mapping[str, Arg]]:
    """Every plugin of the default profile and the arguments it declares (maybe none)."""
    return {
        spec.name: getattr(plugin_class(spec.name), "arguments", {})
        for spec in Profile.default().plugins
    }


def check_args(config: Any) -> dict[str, str]:
    """What is wrong with per-plugin arguments `{plugin: {argument: value}}`, checked against
    the plugins of the default profile and the `arguments` each declares (empty: all valid)."""
    if not isinstance(config, Mapping):
        return {"": "expected an object of plugin name -> arguments"}
    configurable = configurable_arguments()
    problems: dict[str, str] = {}
    for plugin, args in config.items():
        if plugin not in configurable:
            problems[str(plugin)] = f"unknown plugin; known: {', '.join(sorted(configurable))}"
            continue
        problems.update(_plugin_problems(plugin, configurable[plugin], args))
    return problems


def _plugin_problems(plugin: str, declared: Mapping[str, Arg], args: Any) -> dict[str, str]:
    """What is wrong with one plugin's arguments against what it `declared`."""
    if not isinstance(args, Mapping):
        return {plugin: "expected an object of argument name -> value"}
    problems: dict[str, str] = {}
    for name, value in args.items():
        arg = declared.get(name)
        if arg is None:
            known = ", ".join(sorted(declared)) or "none"
            problems[f"{plugin}.{name}"] = f"unknown argument; {plugin} takes: {known}"
            continue
        problem = _arg_problem(arg, value)
        if problem:
            problems[f"{plugin}.{name}"] = problem
    return problems


def _arg_problem(arg: Arg, value: Any) -> str:
    """Why `value` does not match `arg` ("" when it does)."""
    if arg.kind == "bool":
        return "" if isinstance(value, bool) else "expected true or false"
    if arg.kind == "choice":
        return "" if value in arg.choices else f"expected one of {', '.join(arg.choices)}"
    if arg.kind == "int":
        return _int_problem(arg, value)
    if arg.kind == "duration":
        ok = isinstance(value, str) and duration_seconds(value) is not None
        return "" if ok else 'expected a duration such as "5m" or "300s"'
    if arg.kind == "object":
        return _object_problem(arg, value)
    if not isinstance(value, Mapping):
        return "expected an object of resource name -> integer"
    for resource, amount in value.items():
        problem = _int_problem(arg, amount)
        if problem:
            return f"{resource}: {problem}"
    return ""


def _object_problem(arg: Arg, value: Any) -> str:
    if not isinstance(value, Mapping):
        return f"expected an object with {', '.join(name for name, _ in arg.fields)}"
    fields = dict(arg.fields)
    for key, item in value.items():
        if key not in fields:
            return f"unknown field {key!r}; takes: {', '.join(fields)}"
        problem = _arg_problem(fields[key], item)
        if problem:
            return f"{key}: {problem}"
    return ""


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?$")


def duration_seconds(text: str) -> int | None:
    """A Kubernetes (Go) duration in whole hours, minutes and seconds, in seconds; None if not."""
    match = _DURATION.match(text.strip())
    if not match or not text.strip() or not any(match.groups()):
        return None
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def _int_problem(arg: Arg, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        return "expected an integer"
    top = f" and at most {arg.maximum}" if arg.maximum is not None else ""
    if value < arg.minimum or (arg.maximum is not None and value > arg.maximum):
        return f"expected at least {arg.minimum}{top}"
    return ""


def plugin_class(name: str) -> Any:
    """The class a plugin name stands for (see `REGISTRY`)."""
    target = REGISTRY.get(name)
    if target is None:
        raise ValueError(f"unknown plugin {name!r}; known: {', '.join(sorted(REGISTRY))}")
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def load_plugin(spec: PluginSpec) -> Any:
    """The plugin built with its arguments, checked against what it declares (`ProfileError`)."""
    cls = plugin_class(spec.name)
    problems = _plugin_problems(spec.name, getattr(cls, "arguments", {}), spec.args)
    if problems:
        raise ProfileError(problems)
    return cls(spec.args)


def _importable(name: str) -> bool:
    module_name, _, attr = REGISTRY[name].partition(":")
    try:
        return hasattr(importlib.import_module(module_name), attr)
    except ImportError:
        return False
