"""Engine decisions in plain sentences, and their details as labelled, formatted lines.

The engine answers with a status code, a message in Koordinator's words and structured details
(`scheduler/result.py`: `desired_offer_slots`, `domain_offer_slots`, `node_reasons`,
`quota_shortfall`, `counterfactual`, `preemption`, `plugin`, ...; placed jobs: `chosen_domain`,
`chosen_offer_slots`, `alternatives`). `reason_code` names the case, `decision_sentence` says it,
`detail_lines` lists the details for the "details" disclosure. Pages, the API's `explain` and
the what-if page all call these; nothing else turns engine output into words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordweb.presenters.quantities import amounts_text, number, resource_name
from scheduler.placement import NO_CANDIDATE
from scheduler.plugins.preemption import NO_VICTIMS, NOT_HELPFUL
from scheduler.plugins.quota import INSUFFICIENT

# Reason codes, one per kind of answer a page can give.
PLACED = "placed"
PLACED_NOMINATED = "placed-nominated"
TOPOLOGY = "topology"
NODE_RESOURCES = "node-resources"
QUOTA = "quota"
GANG_WAITING = "gang-waiting"
GANG_SHORT = "gang-short"
VICTIMS_TERMINATING = "victims-terminating"
PREEMPTING = "preempting"
DEVICES = "devices"
INVALID = "invalid"
NEVER_FITS = "never-fits"
NOT_DECIDED = "not-decided"
OTHER = "other"

NEVER_FITS_PREFIX = "can never run: "
_LAYER_WORDS = {"ClusterTopologyLayer": "cluster", "NodeTopologyLayer": "node"}
_AVAILABLE = re.compile(r"(\d+)/(\d+) nodes are available")


@dataclass(frozen=True)
class Explanation:
    code: str
    sentence: str
    details: tuple[tuple[str, str], ...] = ()


def layer_word(layer: str) -> str:
    """'BlockLayer' -> 'block', 'SpineLayer' -> 'spine'."""
    if layer in _LAYER_WORDS:
        return _LAYER_WORDS[layer]
    word = layer.removesuffix("Layer") or layer
    return re.sub(r"(?<!^)(?=[A-Z])", " ", word).lower()


def domain_text(label: Any) -> str:
    """'BlockLayer/b1' -> 'block b1'; the root ('ClusterTopologyLayer/') -> 'the whole cluster'."""
    text = str(label or "")
    if text in ("", "nominated nodes"):
        return text or "the cluster"
    layer, _, name = text.partition("/")
    if layer == "ClusterTopologyLayer" or not name:
        return "the whole cluster"
    return f"{layer_word(layer)} {name}"


def pods(n: Any) -> str:
    count = int(n) if isinstance(n, (int, float)) else 0
    return f"{number(count)} pod{'' if count == 1 else 's'}"


def _node_reason(reason: str) -> str:
    if reason.startswith("Insufficient "):
        return f"too little free {resource_name(reason.removeprefix('Insufficient '))}"
    if reason == "Too many pods":
        return "no pod slots left"
    return reason[:1].lower() + reason[1:]


def _as_dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def reason_code(outcome: str | None, reason: str | None, details: Mapping[str, Any]) -> str:
    """Which case a decision is: one of the module's codes."""
    reason = reason or ""
    plugin = str(details.get("plugin") or "")
    preemption = _as_dict(details.get("preemption"))
    if reason.startswith(NEVER_FITS_PREFIX) or details.get("never_fits"):
        return NEVER_FITS
    if outcome == "placed":
        return PLACED_NOMINATED if details.get("nominated") else PLACED
    if not outcome:
        return NOT_DECIDED
    if outcome == "preempting":
        return PREEMPTING
    if str(preemption.get("reason", "")).startswith("waiting for preemption victims"):
        return VICTIMS_TERMINATING
    if reason.startswith("waiting for preemption victims"):
        return VICTIMS_TERMINATING
    if plugin == "ElasticQuota" or reason.startswith(INSUFFICIENT):
        return QUOTA
    if plugin == "NetworkTopology" or reason.startswith(NO_CANDIDATE):
        return TOPOLOGY
    if plugin == "Coscheduling" or reason.startswith("gang "):
        return GANG_WAITING if "min_available" in details or " has " in reason else GANG_SHORT
    if plugin == "DeviceShare":
        return DEVICES
    if plugin == "NodeResourcesFit" or _AVAILABLE.search(reason):
        return NODE_RESOURCES
    if reason.startswith("invalid"):
        return INVALID
    return OTHER


def decision_sentence(
    outcome: str | None,
    reason: str | None,
    details: Mapping[str, Any] | None = None,
    *,
    state: str = "",
) -> Explanation:
    """The decision in one or two sentences, with its details as formatted lines."""
    details = _as_dict(details)
    code = reason_code(outcome, reason, details)
    sentence = _SENTENCES[code](reason or "", details, state)
    extra = _preemption_sentence(code, details)
    if extra:
        sentence = f"{sentence} {extra}"
    return Explanation(code, sentence, tuple(detail_lines(details)))


def _placed(reason: str, d: dict[str, Any], state: str) -> str:
    domain = d.get("chosen_domain")
    if not domain:
        return "Placed."
    text = f"Placed in {domain_text(domain)}"
    if d.get("chosen_offer_slots") is not None and d.get("desired_offer_slots") is not None:
        text += (
            f", which had room for {pods(d['chosen_offer_slots'])}"
            f" ({pods(d['desired_offer_slots'])} needed)"
        )
    others = len(_as_dict(d.get("alternatives"))) - 1
    if others > 0:
        text += f"; {others} other domain{'' if others == 1 else 's'} could also hold it"
    return text + "."


def _placed_nominated(reason: str, d: dict[str, Any], state: str) -> str:
    return "Placed on the nodes a preemption reserved for it."


def _topology(reason: str, d: dict[str, Any], state: str) -> str:
    desired = d.get("desired_offer_slots")
    if desired is None:
        found = re.search(r"desiredOfferSlot: (\d+)", reason)
        desired = int(found[1]) if found else None
    slots = {str(k): int(v) for k, v in _as_dict(d.get("domain_offer_slots")).items()}
    if not slots:
        if desired is None:
            return "No topology domain has room for all of the job's pods together."
        return f"No topology domain has room for all {pods(desired)} of the job together."
    layer = next(iter(slots)).partition("/")[0]
    best, room = max(slots.items(), key=lambda item: (item[1], item[0]))
    return (
        f"No {layer_word(layer)} has room for all {pods(desired)} together: "
        f"the roomiest, {domain_text(best)}, has room for {pods(room)} now."
    )


def _node_resources(reason: str, d: dict[str, Any], state: str) -> str:
    reasons = {str(k): int(v) for k, v in _as_dict(d.get("node_reasons")).items()}
    found = _AVAILABLE.search(reason)
    text = ""
    if found:
        text = f"{number(int(found[1]))} of {number(int(found[2]))} nodes can take one of its pods"
    listed = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))[:4]
    if listed:
        why = ", ".join(f"{number(n)} with {_node_reason(r)}" for r, n in listed)
        text = f"{text}; the others: {why}" if text else f"Nodes ruled out: {why}"
    if d.get("offer_slots") is not None and d.get("desired_offer_slots") is not None:
        text += (
            f". Together they have room for {pods(d['offer_slots'])}, "
            f"the job needs {pods(d['desired_offer_slots'])}"
        )
    return (text or "No node has room for the job's pods") + "."


def _quota(reason: str, d: dict[str, Any], state: str) -> str:
    quota = d.get("quota") or _quoted(reason, "quotaName: ")
    shortfall = _as_dict(_as_dict(d.get("quota_shortfall")).get(str(quota)))
    if not shortfall:
        first: Any = next(iter(_as_dict(d.get("quota_shortfall")).values()), {})
        shortfall = _as_dict(first)
    if shortfall:
        return f"Quota {quota} has too little left: it needs {amounts_text(shortfall)} more."
    dims = d.get("exceeded_dimensions") or []
    names = ", ".join(resource_name(str(r)) for r in dims)
    return f"Quota {quota} has too little left{f' of {names}' if names else ''}."


def _quoted(reason: str, key: str) -> str:
    found = re.search(re.escape(key) + r"([^,\s]+)", reason)
    return found[1] if found else "?"


def _gang_waiting(reason: str, d: dict[str, Any], state: str) -> str:
    if "pods" in d and "min_available" in d:
        return (
            f"Waiting for its gang: {number(d['pods'])} of the "
            f"{number(d['min_available'])} pods it needs exist."
        )
    return "Waiting for the rest of its gang's pods."


def _gang_short(reason: str, d: dict[str, Any], state: str) -> str:
    found = re.search(r"would have (\d+) of min-available (\d+)", reason)
    if found:
        return (
            f"Only {pods(int(found[1]))} would fit at once; the gang needs "
            f"{pods(int(found[2]))} together."
        )
    return "Not enough of the gang's pods would fit at once."


def _victims_terminating(reason: str, d: dict[str, Any], state: str) -> str:
    text = str(_as_dict(d.get("preemption")).get("reason") or reason)
    nodes = text.partition(" on ")[2]
    where = f" on {nodes}" if nodes else ""
    return f"Waiting for the pods it preempted to terminate{where}."


def _preempting(reason: str, d: dict[str, Any], state: str) -> str:
    victims = len(_as_dict(d.get("nominations")))
    text = "Preempting lower-priority jobs to make room"
    return text + (f"; {pods(victims)} will start on the freed nodes." if victims else ".")


def _devices(reason: str, d: dict[str, Any], state: str) -> str:
    detail = reason.split(": ", 1)[-1] if ": " in reason else reason
    return f"No free cards fit the request: {detail}." if detail else "No free cards fit."


def _invalid(reason: str, d: dict[str, Any], state: str) -> str:
    return f"The job's request is invalid: {reason.removeprefix('invalid ')}."


def _never_fits(reason: str, d: dict[str, Any], state: str) -> str:
    text = reason.removeprefix(NEVER_FITS_PREFIX) or str(d.get("never_fits") or "")
    return f"Can never run: {text}."


def _not_decided(reason: str, d: dict[str, Any], state: str) -> str:
    if state == "Pending":
        return "Waiting for the next scheduling round."
    text = (reason or state or "—").strip().rstrip(".")
    return f"{text[:1].upper()}{text[1:]}."


def _other(reason: str, d: dict[str, Any], state: str) -> str:
    text = reason.strip().rstrip(".")
    return f"{text}." if text else "Not placed this round."


_SENTENCES = {
    PLACED: _placed,
    PLACED_NOMINATED: _placed_nominated,
    TOPOLOGY: _topology,
    NODE_RESOURCES: _node_resources,
    QUOTA: _quota,
    GANG_WAITING: _gang_waiting,
    GANG_SHORT: _gang_short,
    VICTIMS_TERMINATING: _victims_terminating,
    PREEMPTING: _preempting,
    DEVICES: _devices,
    INVALID: _invalid,
    NEVER_FITS: _never_fits,
    NOT_DECIDED: _not_decided,
    OTHER: _other,
}


_STATE_WORDS = {
    "Preempting": "Being preempted: its pods are terminating and still hold their nodes; it is "
    "Preempted once they are gone.",
    "Requeueing": "A node refused one of its pods: its pods are being deleted, then it waits in "
    "the queue again.",
    "Preempted": "Preempted.",
    "Succeeded": "Finished.",
    "Failed": "Failed.",
    "Cancelled": "Cancelled.",
}


def state_sentence(state: str, state_reason: str = "") -> Explanation:
    """A job that no decision explains (being preempted, requeued, or over), in words: the
    state's meaning, then the recorded reason when there is one."""
    text = _STATE_WORDS.get(state, f"{state}.")
    reason = (state_reason or "").strip().rstrip(".")
    if reason and reason.lower() != state.lower():
        text = f"{text} {reason[:1].upper()}{reason[1:]}."
    return Explanation(f"state-{state.lower()}", text)


def _preemption_sentence(code: str, details: Mapping[str, Any]) -> str:
    """Why preempting did not help, when the engine tried."""
    if code in (PLACED, PLACED_NOMINATED, PREEMPTING, VICTIMS_TERMINATING, NOT_DECIDED):
        return ""
    reason = str(_as_dict(details.get("preemption")).get("reason") or "")
    if not reason or reason == "preempting":
        return ""
    return preemption_status_sentence(reason)


def preemption_status_sentence(reason: str) -> str:
    """The preemption plugin's answer in words."""
    if reason.startswith(NO_VICTIMS):
        return "Preempting would not help: no lower-priority job can be evicted."
    if reason.startswith(NOT_HELPFUL):
        return "Preempting would not help: evicting every lower-priority job still leaves no room."
    if "preemptionPolicy" in reason:
        return "It may not preempt (its preemption policy is Never)."
    if "PodDisruptionBudget" in reason:
        return f"Preempting is blocked by a disruption budget ({reason.rsplit(' ', 1)[-1]})."
    return f"Preemption: {reason}."


def counterfactual_sentence(
    counterfactual: Any, visible: set[str] | None = None, *, hidden: int = 0
) -> str:
    """What would let the job run: 'It would fit in block b2 if team/x were preempted',
    'It would run with 8 more GPUs in quota team-a'. Jobs outside `visible` are counted."""
    if isinstance(counterfactual, str):
        return counterfactual  # recorded as words already
    if not isinstance(counterfactual, Mapping):
        return ""
    parts = []
    evict = [str(j) for j in counterfactual.get("evict_jobs") or []]
    hidden += int(counterfactual.get("other_tenants_jobs") or 0)
    if evict or hidden:
        shown = [j for j in evict if visible is None or j in visible]
        hidden += len(evict) - len(shown)
        names = shown + ([f"{hidden} job(s) of other tenants"] if hidden else [])
        where = counterfactual.get("fits_in")
        place = f" in {domain_text(where)}" if where else ""
        verb = "were" if len(shown) + hidden > 1 else "was"
        parts.append(f"It would fit{place} if {', '.join(names)} {verb} preempted.")
    for quota, missing in _as_dict(counterfactual.get("quota_increase")).items():
        if isinstance(missing, Mapping) and missing:
            parts.append(f"It would run with {amounts_text(missing)} more in quota {quota}.")
    return " ".join(parts)


def preemption_rule_sentence(cost: Mapping[str, Any] | None, preemptor_priority: int) -> str:
    """Which rule allowed an eviction: priority, or reclaiming borrowed quota."""
    highest = _as_dict(cost).get("highest_victim_priority")
    if isinstance(highest, int) and highest >= preemptor_priority:
        return "Borrowed quota reclaimed: the preemptor's quota is within its guaranteed minimum."
    if isinstance(highest, int):
        return f"Lower-priority jobs evicted: priority {preemptor_priority} over at most {highest}."
    return "Lower-priority jobs evicted."


def preemption_reason_sentence(reason: str) -> str:
    """A recorded preemption reason ('<rule>: <why the preemptor did not fit>') in words."""
    rule, sep, engine = reason.partition(": ")
    if not sep:
        return decision_sentence("unschedulable", reason).sentence
    why = decision_sentence("unschedulable", engine)
    rule_text = rule[:1].upper() + rule[1:]
    if why.code == OTHER:
        return f"{rule_text}: {engine}"
    return f"{rule_text}. It did not fit because: {why.sentence[:1].lower()}{why.sentence[1:]}"


def cost_lines(cost: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """A preemption's cost as labelled lines: victims, their highest priority, resources freed,
    disruption budgets it would break."""
    cost = _as_dict(cost)
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
    resources = _as_dict(cost.get("resources"))
    if resources:
        lines.append(("Freed", amounts_text({k: int(v) for k, v in resources.items()})))
    violations = _as_dict(cost.get("pdb_violations"))
    if violations:
        listed = ", ".join(f"{name} ({pods(n)})" for name, n in sorted(violations.items()))
        lines.append(("Disruption budgets broken", listed))
    elif "pdb_violations" in cost:
        lines.append(("Disruption budgets broken", "none"))
    return lines


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
    "runtime": "Quota's runtime share",
    "used": "Quota in use",
    "request": "This job asks",
    "preemption": "Preemption",
    "nominations": "Pods nominated to nodes",
    "placements": "Pods placed",
    "gang": "Gang",
    "pods": "Gang pods that exist",
    "min_available": "Gang needs at least",
    "nominated": "On reserved nodes",
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
        return f"the {value} plugin"
    if key in ("domain_offer_slots", "alternatives"):
        return _domains(_as_dict(value))
    if key == "chosen_domain":
        return domain_text(value)
    if key in ("desired_offer_slots", "chosen_offer_slots", "offer_slots"):
        return pods(value)
    if key == "node_reasons":
        ranked = sorted(_as_dict(value).items(), key=lambda item: (-int(item[1]), item[0]))
        return ", ".join(f"{number(int(n))} with {_node_reason(str(r))}" for r, n in ranked)
    if key == "exceeded_dimensions" and isinstance(value, Sequence):
        return ", ".join(resource_name(str(r)) for r in value)
    if key == "quota_shortfall":
        return "; ".join(
            f"{quota}: {amounts_text(_as_dict(missing))}"
            for quota, missing in sorted(_as_dict(value).items())
        )
    if key in ("runtime", "used", "request"):
        amounts = _as_dict(value)
        if amounts and all(isinstance(v, Mapping) for v in amounts.values()):
            amounts = next(iter(amounts.values()))
        return amounts_text({k: int(v) for k, v in _as_dict(amounts).items()})
    if key == "preemption":
        return preemption_status_sentence(str(_as_dict(value).get("reason") or "")) or ""
    if key == "counterfactual":
        return ""  # said apart, with other tenants' jobs counted, never named
    if key in ("nominations", "placements"):
        chosen = _as_dict(value)
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
