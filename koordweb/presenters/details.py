"""Engine details as labelled lines for the "details" disclosure, and a preemption's cost.

Domains by name, amounts with units, pods counted; never a dict. The counterfactual is left out:
it is said apart (`reasons.counterfactual_sentence`), with other tenants' jobs counted, not named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koordweb.presenters.quantities import amounts_text, number, resource_name
from koordweb.presenters.words import (
    as_dict,
    domain_text,
    layer_word,
    nodes_ruled_out,
    pods,
    spaced_words,
)
from scheduler.api import causes


def preemption_status_sentence(preemption: Mapping[str, Any]) -> str:
    """The preemption plugin's answer (`details["preemption"]`: its `cause` code and `values`)
    in words; an answer recorded without a code is said as recorded."""
    code = str(preemption.get("cause") or "")
    values = as_dict(preemption.get("values"))
    if code == causes.NO_VICTIMS:
        return "Preempting would not help: no lower-priority job can be evicted."
    if code == causes.PREEMPTION_NOT_HELPFUL:
        return _not_helpful(values)
    if code == causes.PREEMPTING:
        return "Evicting lower-priority jobs to make room for it."
    if code == causes.PREEMPTION_NEVER:
        return "It may not preempt: its preemption policy is to never preempt."
    if code == causes.BLOCKED_BY_DISRUPTION_BUDGET:
        budgets = [str(b) for b in values.get("budgets") or []]
        which = f" ({', '.join(budgets)})" if budgets else ""
        return f"Preempting is blocked by a disruption budget{which}."
    if code == causes.VICTIMS_TERMINATING:
        return "Waiting for the pods it preempted to terminate."
    if not code and preemption.get("status") == "Success":
        # Recorded before the engine gave a cause: kube-scheduler's PostFilter status says it.
        return "Evicting lower-priority jobs to make room for it."
    # Recorded before the engine gave a code: its message is in the engine's words.
    return "Preempting did not make room for it." if preemption else ""


def recorded_sentence(lead: str, text: Any) -> str:
    """A message recorded without a cause (by an older version), said as it is after `lead`."""
    said = str(text or "").strip().rstrip(".")
    return f"{lead}: {said}." if said else ""


def _not_helpful(values: Mapping[str, Any]) -> str:
    """Why evicting every candidate would not help, from the dry run's numbers: the nodes still
    ruled out, by reason, or the topology domain that would still be too small."""
    if values.get("victims") == 0:
        return (
            "Preempting would not help: the job fits without evicting anyone, so what holds it "
            "back is not room on the nodes."
        )
    lead = "Preempting would not help: evicting every lower-priority job still leaves no room"
    dry = as_dict(values.get("dry_run"))
    numbers = as_dict(dry.get("values"))
    if dry.get("code") == causes.TOPOLOGY_NO_DOMAIN and numbers.get("best_domain") is not None:
        layer = str(numbers.get("layer") or "")
        where = f"one {layer_word(layer)}" if layer else "one topology domain"
        return (
            f"{lead} in {where}: the roomiest, {domain_text(numbers['best_domain'])}, would have "
            f"room for {pods(numbers.get('best_offer_slots') or 0)}."
        )
    why = nodes_ruled_out(dry.get("node_reasons"))
    total = numbers.get("total_nodes")
    if why and total is not None:
        return f"{lead} (of {number(int(total))} nodes, ruled out even then: {why})."
    return f"{lead} (nodes ruled out even then: {why})." if why else f"{lead}."


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
    return f"the {spaced_words(plugin)} check"


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
_REASON_LIMIT = 12


def detail_lines(details: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every detail as (label, text): domains by name, amounts with units, never a dict."""
    lines = []
    cause = as_dict(details.get("cause"))
    for key in sorted(
        details,
        key=lambda k: (
            (list(_DETAIL_LABELS).index(k)) if k in _DETAIL_LABELS else len(_DETAIL_LABELS)
        ),
    ):
        if key == "node_reasons":
            text = _ruled_out(details[key], cause)
        else:
            text = _detail_text(key, details[key])
        if text:
            lines.append((_DETAIL_LABELS.get(key, key.replace("_", " ").capitalize()), text))
    return lines


def _ruled_out(recorded: Any, cause: Mapping[str, Any]) -> str:
    """The nodes ruled out, by reason: worded from the cause's codes, or (a decision recorded
    without a cause) each reason as recorded with its count."""
    if cause:
        return nodes_ruled_out(cause.get("node_reasons"), limit=_REASON_LIMIT)
    ranked = sorted(as_dict(recorded).items(), key=lambda item: (-int(item[1]), str(item[0])))
    return ", ".join(f"{number(int(n))}: {reason}" for reason, n in ranked)


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
        return preemption_status_sentence(as_dict(value))
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
