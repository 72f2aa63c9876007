"""Engine details as labelled lines for the "details" disclosure, and a preemption's cost.

Domains by name, amounts with units, pods counted; never a dict. The counterfactual is left out:
it is said apart (`reasons.counterfactual_sentence`), with other tenants' jobs counted, not named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from koordweb.presenters.quantities import amounts_text, number, resource_name
from koordweb.presenters.words import as_dict, domain_text, layer_word, node_reason, pods
from scheduler.api import NO_VICTIMS, NOT_HELPFUL

# The preemption plugin's reason when it found victims (the preemption record counts them).
PREEMPTING = "preempting"


def preemption_status_sentence(reason: str) -> str:
    """The preemption plugin's answer in words."""
    if reason.startswith(NO_VICTIMS):
        return "Preempting would not help: no lower-priority job can be evicted."
    if reason.startswith(NOT_HELPFUL):
        why = _nodes_refused(reason.removeprefix(NOT_HELPFUL))
        return (
            "Preempting would not help: evicting every lower-priority job still leaves no room"
            + (f" (nodes ruled out even then: {why})." if why else ".")
        )
    if reason == PREEMPTING:
        return "Evicting lower-priority jobs to make room for it."
    if "preemptionPolicy" in reason:
        return "It may not preempt: its preemption policy is to never preempt."
    if "PodDisruptionBudget" in reason:
        return f"Preempting is blocked by a disruption budget ({reason.rsplit(' ', 1)[-1]})."
    return f"Preemption: {reason}."


def _nodes_refused(rest: str) -> str:
    """kube-scheduler's "0/N nodes are available: 3 node(s) <why>, 2 Insufficient cpu." in words,
    the four largest counts first."""
    _, found, listed = rest.partition("nodes are available: ")
    counted: dict[str, int] = {}
    for item in listed.rstrip(".").split(", ") if found else []:
        count, _, phrase = item.partition(" ")
        if count.isdecimal() and phrase:
            words = node_reason(phrase)
            counted[words] = counted.get(words, 0) + int(count)
    ranked = sorted(counted.items(), key=lambda item: (-item[1], item[0]))[:4]
    return ", ".join(f"{number(n)} with {words}" for words, n in ranked)


def cost_lines(cost: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """A preemption's cost as labelled lines: victims, their highest priority, resources freed,
    disruption budgets it would break."""
    cost = as_dict(cost)
    lines: list[tuple[str, str]] = []
    if "victim_jobs" in cost or "jobs" in cost:
        jobs = int(cost.get("victim_jobs", cost.get("jobs", 0)) or 0)
        text = f"{number(jobs)} job{'' if jobs == 1 else 's'}"
        if cost.get("victim_pods") is not None:
            text += f", {pods(cost['victim_pods'])}"
        lines.append(("Evicted", text))
    highest = cost.get("highest_victim_priority", cost.get("max_victim_priority"))
    if highest is not None:
        lines.append(("Highest victim priority", str(highest)))
    resources = as_dict(cost.get("resources"))
    if resources:
        lines.append(("Freed", amounts_text({k: int(v) for k, v in resources.items()})))
    violations = as_dict(cost.get("pdb_violations"))
    if violations:
        listed = ", ".join(f"{name} ({pods(n)})" for name, n in sorted(violations.items()))
        lines.append(("Disruption budgets broken", listed))
    elif "pdb_violations" in cost:
        lines.append(("Disruption budgets broken", "none"))
    return lines


# The engine's plugins (scheduler/plugins, scheduler/profile.py) by what each checks.
PLUGIN_WORDS = {
    "PrioritySort": "the queue order",
    "Coscheduling": "the gang check",
    "ElasticQuota": "the quota check",
    "NetworkTopology": "the network topology check",
    "NodeResourcesFit": "the node resource check",
    "DeviceShare": "the accelerator card check",
    "LoadAware": "the node load check",
    "NodeUnschedulable": "the cordoned-node check",
    "NodeAffinity": "the node selector check",
    "TaintToleration": "the node taint check",
    "JobPreemption": "the preemption step",
}


def plugin_text(plugin: str) -> str:
    """'the quota check' for ElasticQuota; a plugin added later is named in words from its name."""
    if plugin in PLUGIN_WORDS:
        return PLUGIN_WORDS[plugin]
    return "the " + re.sub(r"(?<!^)(?=[A-Z])", " ", plugin).lower() + " check"


# Labels of the details people may open; anything else is shown under its key in words.
_DETAIL_LABELS = {
    "plugin": "Decided by",
    "desired_offer_slots": "Pods to place together",
    "chosen_domain": "Chosen domain",
    "chosen_offer_slots": "Room in the chosen domain",
    "offer_slots": "Room on all nodes",
    "domain_offer_slots": "Room per domain",
    "alternatives": "Other candidate domains",
    "node_reasons": "Nodes ruled out",
    "quota": "Quota",
    "exceeded_dimensions": "Resources over quota",
    "quota_shortfall": "Quota short by",
    "runtime": "The quota may use now",
    "used": "Quota in use",
    "request": "This job asks",
    "preemption": "Preemption",
    "nominations": "Pods nominated to nodes",
    "placements": "Pods placed",
    "gang": "Gang",
    "pods": "Gang pods that exist",
    "min_available": "Gang needs at least",
    "nominated": "On reserved nodes",
    "gather_layer": "Must fit in one",
    "reached": "Gang pods that would fit",
}
_DOMAIN_LIMIT = 12


def detail_lines(details: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every detail as (label, text): domains by name, amounts with units, never a dict."""
    lines = []
    for key in sorted(
        details,
        key=lambda k: (
            (list(_DETAIL_LABELS).index(k)) if k in _DETAIL_LABELS else len(_DETAIL_LABELS)
        ),
    ):
        text = _detail_text(key, details[key])
        if text:
            lines.append((_DETAIL_LABELS.get(key, key.replace("_", " ").capitalize()), text))
    return lines


def _domains(slots: Mapping[str, Any]) -> str:
    ranked = sorted(slots.items(), key=lambda item: (-int(item[1] or 0), str(item[0])))
    shown = ", ".join(f"{domain_text(k)}: {pods(v)}" for k, v in ranked[:_DOMAIN_LIMIT])
    more = len(ranked) - _DOMAIN_LIMIT
    return shown + (f", and {more} more" if more > 0 else "")


def _detail_text(key: str, value: Any) -> str:
    if value is None or value == {} or value == []:
        return ""
    if key == "plugin":
        return plugin_text(str(value))
    if key in ("domain_offer_slots", "alternatives"):
        return _domains(as_dict(value))
    if key == "chosen_domain":
        return domain_text(value)
    if key in ("desired_offer_slots", "chosen_offer_slots", "offer_slots"):
        return pods(value)
    if key == "node_reasons":
        ranked = sorted(as_dict(value).items(), key=lambda item: (-int(item[1]), item[0]))
        return ", ".join(f"{number(int(n))} with {node_reason(str(r))}" for r, n in ranked)
    if key == "exceeded_dimensions" and isinstance(value, Sequence):
        return ", ".join(resource_name(str(r)) for r in value)
    if key == "quota_shortfall":
        return "; ".join(
            f"{quota}: {amounts_text(as_dict(missing))}"
            for quota, missing in sorted(as_dict(value).items())
        )
    if key in ("runtime", "used", "request"):
        amounts = as_dict(value)
        if amounts and all(isinstance(v, Mapping) for v in amounts.values()):
            amounts = next(iter(amounts.values()))
        # Resources the quota has none of are not worth a word.
        return amounts_text({k: int(v) for k, v in as_dict(amounts).items() if int(v or 0)})
    if key == "preemption":
        return preemption_status_sentence(str(as_dict(value).get("reason") or "")) or ""
    if key in ("counterfactual", "cause"):
        return ""  # said apart: the counterfactual with other tenants' jobs counted, never
        # named; the cause is what the sentence itself is made of
    if key == "gather_layer":
        return layer_word(str(value))
    if key in ("nominations", "placements"):
        chosen = as_dict(value)
        nodes = sorted(set(map(str, chosen.values())))
        listed = ", ".join(nodes[:8]) + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
        return f"{pods(len(chosen))} on {listed}"
    if key == "nominated":
        return "yes" if value else ""
    if key == "cost":
        return "; ".join(f"{label}: {text}" for label, text in cost_lines(value))
    return _plain_value(value)


def _plain_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return number(value)
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_plain_value(v)}" for k, v in sorted(value.items()))
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain_value(v) for v in value)
    return str(value)
