"""Scheduler profiles: which plugins a round runs, in what order, with which arguments.

A `Profile` names plugins (`PluginSpec(name, args)`). A plugin name stands for a "module:Class"
found, in this order, in `REGISTRY` (in-tree), in the entry-point group `koordweb.scheduler_plugins`
of installed packages, or in the caller's own mapping (`registry=`, koordweb passes its setting
`KOORDWEB_SCHEDULER_PLUGINS`); a name registered twice is refused. Every plugin, in-tree or not, is
held to the same checks when built: its arguments against what it declares (`arguments`), its
methods against the extension points it declares (`scheduler.contracts`).

A cluster's configuration (`Profile.configured`) is `{plugin: {argument: value}}` for plugins of the
default profile, plus `"enabledPlugins": [name, ...]` adding registered plugins to it (each serves
the points it declares), configured under their own names in the same way:
`{"enabledPlugins": ["PreferLabel"], "PreferLabel": {"label": "fast-disk"}}`. `check_args` names
every bad entry by its path (`enabledPlugins[0]`, `PreferLabel.label`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from scheduler.contracts import conformance_problems
from scheduler.durations import duration_seconds as duration_seconds  # koordweb reads it here
from scheduler.framework import Arg, Plugin
from scheduler.plugin_args import PluginArgs

if TYPE_CHECKING:
    from scheduler.framework import Handle

ENTRY_POINT_GROUP = "koordweb.scheduler_plugins"
ENABLED = "enabledPlugins"  # the configuration key that adds registered plugins to the profile

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

# Order matters where it shows: PreFilter runs devices, gang, topology validation, then quota
# admission.
DEFAULT_PLUGINS = (
    "PrioritySort",
    "NodeUnschedulable",
    "NodeAffinity",
    "TaintToleration",
    "NodeResourcesFit",
    "DeviceShare",
    "LoadAware",
    "Coscheduling",
    "NetworkTopology",
    "ElasticQuota",
    "JobPreemption",
)

# Koordinator's reference order, which the default profile leaves for better packing (measured in
# docs/benchmarks.md, explained in docs/koordinator-compat.md): the queue strictly by priority
# then submission, nodes of the chosen domain most offer slots first.
REFERENCE_ORDER: dict[str, dict[str, Any]] = {
    "PrioritySort": {"sizeWindow": "0s"},
    "NetworkTopology": {"bestFit": False, "packParents": False},
}


@dataclass(frozen=True)
class PluginSpec:
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    name: str = "default"
    plugins: tuple[PluginSpec, ...] = ()
    # Plugins registered by the caller, name -> "module:Class" (see the module docstring).
    registry: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def default(**args: Mapping[str, Any]) -> Profile:
        """Koordinator's reference behaviour; keyword arguments give per-plugin args by name."""
        names = DEFAULT_PLUGINS
        return Profile("default", tuple(PluginSpec(n, dict(args.get(n, {}))) for n in names))

    @staticmethod
    def reference(**args: Mapping[str, Any]) -> Profile:
        """The default profile in Koordinator's reference order (`REFERENCE_ORDER`); keyword
        arguments as for `default`, over it."""
        merged = {n: {**REFERENCE_ORDER.get(n, {}), **args.get(n, {})} for n in DEFAULT_PLUGINS}
        return Profile.default(**merged)

    @staticmethod
    def configured(config: Mapping[str, Any], registry: Mapping[str, str] | None = None) -> Profile:
        """The default profile with per-plugin arguments `{plugin: {argument: value}}` and the
        `enabledPlugins` added (a cluster's scheduler configuration); raises `ProfileError`
        naming every bad entry."""
        problems = check_args(config, registry)
        if problems:
            raise ProfileError(problems)
        args = {k: v for k, v in config.items() if k != ENABLED}
        default = Profile.default(**args)
        extra = tuple(PluginSpec(n, dict(args.get(n, {}))) for n in config.get(ENABLED, ()))
        return Profile(
            default.name, default.plugins + extra, tuple(sorted((registry or {}).items()))
        )

    def with_args(self, name: str, **args: Any) -> Profile:
        """A copy with `name`'s arguments updated (the plugin is added if missing)."""
        specs = list(self.plugins)
        for i, spec in enumerate(specs):
            if spec.name == name:
                specs[i] = PluginSpec(name, {**spec.args, **args})
                break
        else:
            specs.append(PluginSpec(name, args))
        return Profile(self.name, tuple(specs), self.registry)

    def without(self, *names: str) -> Profile:
        kept = tuple(s for s in self.plugins if s.name not in names)
        return Profile(self.name, kept, self.registry)

    def build(self, handle: Handle) -> list[Plugin]:
        """The plugins, each constructed with its arguments and `handle` and checked
        (`ProfileError` naming the plugin and what is wrong)."""
        registry = dict(self.registry)
        return [load_plugin(spec, handle, registry) for spec in self.plugins]

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


def configurable_arguments(
    registry: Mapping[str, str] | None = None, enabled: Sequence[str] = ()
) -> dict[str, Mapping[str, Arg]]:
    """Every plugin of the default profile, and those `enabled` that load, with the arguments it
    declares (maybe none)."""
    found = {name: declared_arguments(plugin_class(name)) for name in DEFAULT_PLUGINS}
    for name in enabled:
        try:
            found.setdefault(name, declared_arguments(plugin_class(name, registry)))
        except ProfileError:
            continue  # `check_args` says why
    return found


def declared_arguments(cls: type) -> Mapping[str, Arg]:
    declared: Mapping[str, Arg] = getattr(cls, "arguments", {})
    return declared


def check_args(config: Any, registry: Mapping[str, str] | None = None) -> dict[str, str]:
    """What is wrong with a configuration `{plugin: {argument: value}, "enabledPlugins": [...]}`,
    checked against the plugins of the default profile, those enabled (which must be registered
    and conform to the points they declare) and the `arguments` each declares (empty: valid)."""
    if not isinstance(config, Mapping):
        return {"": "expected an object of plugin name -> arguments"}
    try:
        registered = set(plugin_registry(registry))
    except ProfileError as error:  # the deployment's registry itself is wrong
        return {f"registry.{k}": v for k, v in error.problems.items()}
    problems: dict[str, str] = {}
    enabled = _enabled_problems(config.get(ENABLED, []), registry, problems)
    configurable = configurable_arguments(registry, enabled)
    for plugin, args in config.items():
        if plugin == ENABLED:
            continue
        if plugin not in configurable:
            known = ", ".join(sorted(configurable))
            hint = f" (a registered plugin must be listed in {ENABLED} first)"
            listed = hint if plugin in registered else ""
            problems[str(plugin)] = f"unknown plugin{listed}; known: {known}"
            continue
        problems.update(_plugin_problems(plugin, configurable[plugin], args))
    return problems


def _enabled_problems(
    enabled: Any, registry: Mapping[str, str] | None, problems: dict[str, str]
) -> list[str]:
    """The valid names of `enabledPlugins`; what is wrong with the others goes to `problems`."""
    if not isinstance(enabled, list) or not all(isinstance(n, str) for n in enabled):
        problems[ENABLED] = "expected a list of plugin names"
        return []
    known = plugin_registry(registry)  # `check_args` has made sure it is sound
    valid: list[str] = []
    for i, name in enumerate(enabled):
        where = f"{ENABLED}[{i}]"
        if name in DEFAULT_PLUGINS or name in valid:
            problems[where] = f"{name} is already in the profile"
        elif name not in known:
            extra = sorted(set(known) - set(DEFAULT_PLUGINS))
            problems[where] = (
                f"unknown plugin {name!r}; registered besides the default ones: "
                f"{', '.join(extra) or 'none'}"
            )
        else:
            try:
                cls = plugin_class(name, registry)
            except ProfileError as error:
                problems[where] = "; ".join(error.problems.values())
                continue
            wrong = conformance_problems(cls)
            if wrong:
                problems[where] = "; ".join(wrong)
            else:
                valid.append(name)
    return valid


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
    if arg.kind == "string":
        longest = arg.maximum or 253
        ok = isinstance(value, str) and 0 < len(value) <= longest
        return "" if ok else f"expected a non-empty string of at most {longest} characters"
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


def _int_problem(arg: Arg, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        return "expected an integer"
    top = f" and at most {arg.maximum}" if arg.maximum is not None else ""
    if value < arg.minimum or (arg.maximum is not None and value > arg.maximum):
        return f"expected at least {arg.minimum}{top}"
    return ""


@lru_cache(maxsize=1)
def _entry_points() -> tuple[tuple[str, str], ...]:
    """The `koordweb.scheduler_plugins` entry points of installed packages (read once)."""
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return tuple(sorted((ep.name, ep.value) for ep in found))


def plugin_registry(registry: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every known plugin name -> "module:Class": in-tree, entry points, then `registry`.
    A name registered twice (to different targets) is a `ProfileError`."""
    known = dict(REGISTRY)
    problems: dict[str, str] = {}
    sources = [("entry point", n, t) for n, t in _entry_points()]
    sources += [("setting", n, t) for n, t in (registry or {}).items()]
    for source, name, target in sources:
        if known.get(name, target) != target:
            problems[name] = f"registered twice: {known[name]} and {target} ({source})"
        elif not re.fullmatch(r"[\w.]+:[\w.]+", str(target)):
            problems[name] = f'{source} target {target!r} is not "module:Class"'
        else:
            known[name] = target
    if problems:
        raise ProfileError(problems)
    return known


def plugin_class(name: str, registry: Mapping[str, str] | None = None) -> type:
    """The class a plugin name stands for (`ProfileError` when unknown or not importable from an
    out-of-tree package; an in-tree plugin that does not import is a bug and raises as such)."""
    known = plugin_registry(registry)
    target = known.get(name)
    if target is None:
        raise ProfileError({name: f"unknown plugin; known: {', '.join(sorted(known))}"})
    module_name, _, attr = target.partition(":")
    if name in REGISTRY:
        cls: type = getattr(importlib.import_module(module_name), attr)
        return cls
    try:
        found = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as error:
        raise ProfileError({name: f"cannot load {target}: {error}"}) from None
    if not isinstance(found, type):
        raise ProfileError({name: f"{target} is not a class"})
    return found


def load_plugin(
    spec: PluginSpec, handle: Handle, registry: Mapping[str, str] | None = None
) -> Plugin:
    """The plugin built with its arguments and the handle, checked against what it declares:
    its arguments, and its methods against its extension points (`ProfileError`)."""
    cls = plugin_class(spec.name, registry)
    wrong = conformance_problems(cls)
    if wrong:
        raise ProfileError({spec.name: "; ".join(wrong)})
    problems = _plugin_problems(spec.name, declared_arguments(cls), spec.args)
    if problems:
        raise ProfileError(problems)
    plugin: Plugin = cls(PluginArgs(declared_arguments(cls), spec.args), handle)
    return plugin
