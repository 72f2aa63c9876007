"""The scheduler ConfigMap `koord-scheduler-config` <-> a cluster's `scheduler_args`.

Koordinator deploys koord-scheduler with a ConfigMap (config/manager/scheduler-config.yaml, named
`koord-scheduler-config` in `koordinator-system`) whose data key `koord-scheduler-config` holds a
`KubeSchedulerConfiguration`; each profile's `pluginConfig[]` gives a plugin's `args`. Reading it,
the args of the first profile that koordweb has an equivalent for become `scheduler_args`
(`LoadAwareScheduling` -> LoadAware with the same argument names, `DeviceShare`
`scoringStrategy.type` -> DeviceShare `scoring`, `ElasticQuota` `enableCheckParentQuota` and
`enableMinQuotaScale`, `Coscheduling` `enablePreemption`); every other argument, profile or data
key is named in one warning, never dropped silently. Arguments of koordweb's own plugins (topology
placement, job preemption, queue order), which koord-scheduler does not have, travel in a second
data key, `koordweb-scheduler-args` (JSON), so the Koordinator configuration stays one that
koord-scheduler itself accepts; so do out-of-tree plugins a cluster enables (`enabledPlugins`)
and their args. Reading also takes a registered out-of-tree plugin that the first profile enables
in KubeSchedulerConfiguration's own shape (`plugins.<point>.enabled[].name`, its args in
`pluginConfig`). Writing does the reverse, so an exported dump re-imports with
the same `scheduler_args`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml
from django.conf import settings

from scheduler.api import (
    DEFAULT_PLUGINS,
    ProfileError,
    check_args,
    configurable_arguments,
    plugin_registry,
    problem_lines,
)
from scheduler.vocabulary import (
    KOORDWEB_ARGS_KEY,
    SCHEDULER_CONFIG_API,
    SCHEDULER_CONFIG_KEY,
    SCHEDULER_CONFIG_NAME,
    SCHEDULER_CONFIG_NAMESPACE,
)

# Koordinator plugin name -> koordweb plugin name, for plugins whose args are Koordinator's own.
_KOORDINATOR_NAMES = {
    "LoadAwareScheduling": "LoadAware",
    "DeviceShare": "DeviceShare",
    "ElasticQuota": "ElasticQuota",
    "Coscheduling": "Coscheduling",
}
_ARGS_KINDS = {
    "LoadAwareScheduling": "LoadAwareSchedulingArgs",
    "DeviceShare": "DeviceShareArgs",
    "ElasticQuota": "ElasticQuotaArgs",
    "Coscheduling": "CoschedulingArgs",
}
# Type metadata every args object carries; not an argument.
_TYPE_META = ("apiVersion", "kind")


class SchedulerConfigError(ValueError):
    """The ConfigMap is not a KubeSchedulerConfiguration koordweb can read."""


def is_scheduler_config(name: str) -> bool:
    """Whether a ConfigMap of this name is the scheduler configuration."""
    return name == SCHEDULER_CONFIG_NAME


def read_scheduler_config(data: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """(`scheduler_args`, the arguments koordweb does not support, as `Plugin.argument`).

    Raises SchedulerConfigError when the configuration cannot be read or its supported
    arguments do not validate (the message names every bad one).
    """
    args: dict[str, dict[str, Any]] = {}
    unsupported = [
        f"data.{key}"
        for key in sorted(data)
        if key not in (SCHEDULER_CONFIG_KEY, KOORDWEB_ARGS_KEY)
    ]
    if data.get(SCHEDULER_CONFIG_KEY):
        unsupported += _read_profiles(_load_config(data[SCHEDULER_CONFIG_KEY]), args)
    if data.get(KOORDWEB_ARGS_KEY):
        try:
            own = json.loads(data[KOORDWEB_ARGS_KEY])
        except ValueError as exc:
            raise SchedulerConfigError(f"{KOORDWEB_ARGS_KEY} is not JSON: {exc}") from None
        if not isinstance(own, dict):
            raise SchedulerConfigError(f"{KOORDWEB_ARGS_KEY} must be an object of plugin -> args")
        for plugin, plugin_args in own.items():
            if isinstance(plugin_args, dict):
                args.setdefault(str(plugin), {}).update(plugin_args)
            else:
                args[str(plugin)] = plugin_args
    problems = check_args(args, settings.KOORDWEB_SCHEDULER_PLUGINS)
    if problems:
        raise SchedulerConfigError("; ".join(problem_lines(problems)))
    return args, unsupported


def unsupported_warning(unsupported: list[str]) -> str:
    """The one warning naming what koordweb does not apply ("" when nothing)."""
    if not unsupported:
        return ""
    return (
        f"ConfigMap {SCHEDULER_CONFIG_NAME}: koordweb does not support {', '.join(unsupported)};"
        " those settings are not applied"
    )


def scheduler_config_doc(scheduler_args: Mapping[str, Any], scheduler_name: str) -> dict[str, Any]:
    """The ConfigMap document holding `scheduler_args` (the inverse of read_scheduler_config)."""
    plugin_config: list[dict[str, Any]] = []
    own: dict[str, Any] = {}
    koordinator = {ours: theirs for theirs, ours in _KOORDINATOR_NAMES.items()}
    for plugin in sorted(scheduler_args):
        if plugin not in koordinator:
            own[plugin] = scheduler_args[plugin]  # koordweb's plugins, and `enabledPlugins`
            continue
        plugin_args = dict(scheduler_args[plugin])
        theirs = koordinator[plugin]
        if theirs == "DeviceShare" and "scoring" in plugin_args:
            plugin_args["scoringStrategy"] = {"type": plugin_args.pop("scoring")}
        body = {"apiVersion": SCHEDULER_CONFIG_API, "kind": _ARGS_KINDS[theirs], **plugin_args}
        plugin_config.append({"name": theirs, "args": body})
    config = {
        "apiVersion": SCHEDULER_CONFIG_API,
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": scheduler_name, "pluginConfig": plugin_config}],
    }
    data = {SCHEDULER_CONFIG_KEY: yaml.safe_dump(config, sort_keys=False)}
    if own:
        data[KOORDWEB_ARGS_KEY] = json.dumps(own, sort_keys=True)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SCHEDULER_CONFIG_NAME, "namespace": SCHEDULER_CONFIG_NAMESPACE},
        "data": data,
    }


def _load_config(text: str) -> Mapping[str, Any]:
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SchedulerConfigError(f"{SCHEDULER_CONFIG_KEY} is not YAML: {exc}") from None
    if not isinstance(config, Mapping) or config.get("kind") != "KubeSchedulerConfiguration":
        raise SchedulerConfigError(f"{SCHEDULER_CONFIG_KEY} must hold a KubeSchedulerConfiguration")
    return config


def _read_profiles(config: Mapping[str, Any], args: dict[str, dict[str, Any]]) -> list[str]:
    """Fill `args` from the first profile; return what is not supported."""
    profiles = config.get("profiles") or []
    if not isinstance(profiles, list):
        raise SchedulerConfigError("profiles must be a list")
    unsupported = [
        f"profiles[{i}] ({p.get('schedulerName', '?') if isinstance(p, Mapping) else '?'})"
        for i, p in enumerate(profiles[1:], start=1)
    ]
    if not profiles or not isinstance(profiles[0], Mapping):
        return unsupported
    extra = _enabled_out_of_tree(profiles[0].get("plugins"))
    if extra:
        args["enabledPlugins"] = extra  # type: ignore[assignment]  # a list, as check_args reads it
    declared = configurable_arguments()
    for entry in profiles[0].get("pluginConfig") or []:
        if not isinstance(entry, Mapping):
            raise SchedulerConfigError("pluginConfig entries must be objects with name and args")
        name = str(entry.get("name", ""))
        plugin_args = entry.get("args") or {}
        if not isinstance(plugin_args, Mapping):
            raise SchedulerConfigError(f"pluginConfig {name}: args must be an object")
        ours = _KOORDINATOR_NAMES.get(name)
        if name in extra:
            args[name] = {k: v for k, v in plugin_args.items() if k not in _TYPE_META}
            continue
        for key, value in plugin_args.items():
            if key in _TYPE_META:
                continue
            if ours == "DeviceShare" and key == "scoringStrategy" and isinstance(value, Mapping):
                args.setdefault(ours, {})["scoring"] = value.get("type")
                unsupported += [f"{name}.scoringStrategy.{k}" for k in value if k != "type"]
            elif ours is not None and key in declared.get(ours, {}):
                args.setdefault(ours, {})[key] = value
            else:
                unsupported.append(f"{name}.{key}")
    return unsupported


def _enabled_out_of_tree(plugins: Any) -> list[str]:
    """The registered out-of-tree plugins a profile's `plugins.<point>.enabled[]` names, in
    order: koordweb enables them (`enabledPlugins`); its own and Koordinator's names are not
    enabled this way (koordweb's profile has them already)."""
    if not isinstance(plugins, Mapping):
        return []
    try:
        registry = plugin_registry(settings.KOORDWEB_SCHEDULER_PLUGINS)
    except ProfileError as error:
        raise SchedulerConfigError(f"KOORDWEB_SCHEDULER_PLUGINS: {error}") from None
    registered = set(registry) - set(DEFAULT_PLUGINS)
    found: list[str] = []
    for point in plugins.values():
        enabled = point.get("enabled") if isinstance(point, Mapping) else None
        for entry in enabled if isinstance(enabled, list) else []:
            name = entry.get("name") if isinstance(entry, Mapping) else None
            if name in registered and name not in found:
                found.append(str(name))
    return found
