"""Engine decisions in plain sentences: one reason code and one sentence per case.

The engine answers with a status code, a message in Koordinator's words and structured details
(`scheduler/result.py`: `desired_offer_slots`, `domain_offer_slots`, `node_reasons`,
`quota_shortfall`, `counterfactual`, `preemption`, `plugin`, ...; placed jobs: `chosen_domain`,
`chosen_offer_slots`, `alternatives`). `reason_code` names the case, `decision_sentence` says it,
`details.detail_lines` lists the details for the "details" disclosure. Pages, the API's
`explain` and the what-if page all call these; nothing else turns engine output into words.

The engine names each case itself (`details["cause"]`: a code, its plugin and the numbers behind
it, `scheduler.result.Cause`), and the sentences are formatted from those numbers. Decisions
recorded before the engine said so carry no cause; for them the case is still recognised from
the plugin and the Koordinator message, as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordweb.presenters.details import detail_lines, preemption_status_sentence
from koordweb.presenters.quantities import amounts_text, number, quantity_text, resource_name
from koordweb.presenters.words import as_dict, domain_text, layer_word, node_reason, pods
from scheduler.api import (
    INSUFFICIENT,
    NO_CANDIDATE,
    RULE_IN_QUOTA,
    RULE_LOWER_PRIORITY,
    RULE_QUOTA_RECLAIM,
)

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

# The engine's cause codes (`scheduler.result.Cause.code`) -> the case they are.
_CAUSES = {
    "TopologyNoDomain": TOPOLOGY,
    "NodesUnavailable": NODE_RESOURCES,
    "PodShapesDoNotFit": NODE_RESOURCES,
    "QuotaInsufficient": QUOTA,
    "GangIncomplete": GANG_WAITING,
    "GangShort": GANG_SHORT,
    "TopologyInvalid": INVALID,
    "TopologyUnknownLayer": INVALID,
    "PodCountNotMultiple": INVALID,
}

NEVER_FITS_PREFIX = "can never run: "
_AVAILABLE = re.compile(r"(\d+)/(\d+) nodes are available")
_DOMAIN_SLOTS = re.compile(r"(\w+Layer/[^:;\s]+): (\d+)")


@dataclass(frozen=True)
class Explanation:
    code: str
    sentence: str
    details: tuple[tuple[str, str], ...] = ()


def reason_code(outcome: str | None, reason: str | None, details: Mapping[str, Any]) -> str:
    """Which case a decision is: one of the module's codes."""
    reason = reason or ""
    plugin = str(details.get("plugin") or "")
    preemption = as_dict(details.get("preemption"))
    if reason.startswith(NEVER_FITS_PREFIX) or details.get("never_fits"):
        return NEVER_FITS
    if outcome == "placed":
        return PLACED_NOMINATED if details.get("nominated") else PLACED
    if not outcome:
        return NOT_DECIDED
    if outcome == "preempting":
        return PREEMPTING
    cause = as_dict(details.get("cause"))
    if cause:
        if preemption.get("cause") == "VictimsTerminating":
            return VICTIMS_TERMINATING
        if cause.get("plugin") == "DeviceShare":
            return DEVICES
        return _CAUSES.get(str(cause.get("code")), OTHER)
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
    details = as_dict(details)
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
    others = len(as_dict(d.get("alternatives"))) - 1
    if others > 0:
        text += f"; {others} other domain{'' if others == 1 else 's'} could also hold it"
    return text + "."


def _placed_nominated(reason: str, d: dict[str, Any], state: str) -> str:
    return "Placed on the nodes a preemption reserved for it."


def _values(d: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers behind the engine's cause ({} for a decision recorded without one)."""
    return as_dict(as_dict(d.get("cause")).get("values"))


def _topology(reason: str, d: dict[str, Any], state: str) -> str:
    v = _values(d)
    if v:
        return _topology_from_cause(v)
    desired = d.get("desired_offer_slots")
    if desired is None:
        found = re.search(r"desiredOfferSlot: (\d+)", reason)
        desired = int(found[1]) if found else None
    slots = {str(k): int(v) for k, v in as_dict(d.get("domain_offer_slots")).items()}
    if not slots:  # Koordinator's message lists them: "topologyNode BlockLayer/b1: 2; ..."
        slots = {
            m[1]: int(m[2]) for m in _DOMAIN_SLOTS.finditer(reason.partition("topologyNode")[2])
        }
    if not slots:
        if desired is None:
            return "No topology domain has room for all of the job's pods together."
        return f"No topology domain has room for all {pods(desired)} of the job together."
    what = f"all {pods(desired)} of the job" if desired is not None else "all of the job's pods"
    layer = next(iter(slots)).partition("/")[0]
    best, room = max(slots.items(), key=lambda item: (item[1], item[0]))
    return (
        f"No {layer_word(layer)} has room for {what} together: "
        f"the roomiest, {domain_text(best)}, has room for {pods(room)} now."
    )


def _topology_from_cause(v: Mapping[str, Any]) -> str:
    """The job's own size and the layer whose one domain must hold it, from the engine."""
    size, tried = int(v.get("job_pods") or 0), int(v.get("pods") or 0)
    layer = str(v.get("layer") or "")
    where = f"No {layer_word(layer)}" if layer else "No topology domain"
    what = f"all {pods(size)} of the job"
    if tried and tried != size:
        what = f"{pods(tried)} of the job's {pods(size)}"
    text = f"{where} has room for {what} together"
    best = v.get("best_domain")
    if best is None:
        return text + "."
    return (
        f"{text}: the roomiest, {domain_text(best)}, has room for "
        f"{pods(v.get('best_offer_slots') or 0)} now."
    )


def _node_resources(reason: str, d: dict[str, Any], state: str) -> str:
    reasons = {str(k): int(v) for k, v in as_dict(d.get("node_reasons")).items()}
    found = _AVAILABLE.search(reason)
    v = _values(d)
    text = ""
    if "available_nodes" in v and "total_nodes" in v:
        text = (
            f"{number(int(v['available_nodes']))} of {number(int(v['total_nodes']))} nodes"
            " can take one of its pods"
        )
    elif found:
        text = f"{number(int(found[1]))} of {number(int(found[2]))} nodes can take one of its pods"
    # Reasons that read the same ("Insufficient gpu", "Insufficient nvidia.com/gpu") are one.
    worded: dict[str, int] = {}
    for raw, n in reasons.items():
        worded[node_reason(raw)] = worded.get(node_reason(raw), 0) + n
    listed = sorted(worded.items(), key=lambda item: (-item[1], item[0]))[:4]
    if listed:
        why = ", ".join(f"{number(n)} with {words}" for words, n in listed)
        text = f"{text}; the others: {why}" if text else f"Nodes ruled out: {why}"
    room = v.get("offer_slots", d.get("offer_slots"))
    needed = v.get("job_pods", d.get("desired_offer_slots"))
    if room is not None and needed is not None:
        text += f". Together they have room for {pods(room)}, the job needs {pods(needed)}"
    return (text or "No node has room for the job's pods") + "."


def _quota(reason: str, d: dict[str, Any], state: str) -> str:
    quota = d.get("quota") or _quoted(reason, "quotaName: ")
    shortfall = as_dict(as_dict(d.get("quota_shortfall")).get(str(quota)))
    if not shortfall:
        first: Any = next(iter(as_dict(d.get("quota_shortfall")).values()), {})
        shortfall = as_dict(first)
    request = as_dict(d.get("request"))
    over = {r: n for r, n in shortfall.items() if request.get(r) is not None and n > request[r]}
    if over:
        # Past its runtime quota already: more than the job's own ask is missing, and "needs
        # 65 GPUs more" of a job asking 64 read as a wrong sum.
        used, runtime = as_dict(d.get("used")), as_dict(d.get("runtime"))
        name = next(iter(sorted(over)))
        return (
            f"Quota {quota} has no room left: the job asks for "
            f"{quantity_text(name, int(request[name]))}, and the quota already uses "
            f"{quantity_text(name, int(used.get(name, 0)))} of the "
            f"{quantity_text(name, int(runtime.get(name, 0)))} it may use now."
        )
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
    v = _values(d)
    if "reached" in v and "min_available" in v:
        return (
            f"Only {pods(int(v['reached']))} would fit at once; the gang needs "
            f"{pods(int(v['min_available']))} together."
        )
    found = re.search(r"would have (\d+) of min-available (\d+)", reason)
    if found:
        return (
            f"Only {pods(int(found[1]))} would fit at once; the gang needs "
            f"{pods(int(found[2]))} together."
        )
    return "Not enough of the gang's pods would fit at once."


def _victims_terminating(reason: str, d: dict[str, Any], state: str) -> str:
    text = str(as_dict(d.get("preemption")).get("reason") or reason)
    nodes = text.partition(" on ")[2]
    where = f" on {nodes}" if nodes else ""
    return f"Waiting for the pods it preempted to terminate{where}."


def _preempting(reason: str, d: dict[str, Any], state: str) -> str:
    victims = len(as_dict(d.get("nominations")))
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
    said = {state.lower(), text.rstrip(".").lower()}
    if reason and reason.lower() not in said:
        sentence = f"{reason[:1].upper()}{reason[1:]}."
        # "Cancelled by alice" says the state already: "Cancelled. Cancelled by alice." twice.
        opening = re.split(r"[\s(:,;]", reason, maxsplit=1)[0].lower()
        text = sentence if opening in said else f"{text} {sentence}"
    return Explanation(f"state-{state.lower()}", text)


def _preemption_sentence(code: str, details: Mapping[str, Any]) -> str:
    """Why preempting did not help, when the engine tried."""
    if code in (PLACED, PLACED_NOMINATED, PREEMPTING, VICTIMS_TERMINATING, NOT_DECIDED):
        return ""
    reason = str(as_dict(details.get("preemption")).get("reason") or "")
    if not reason or reason == "preempting":
        return ""
    return preemption_status_sentence(reason)


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
        others = (
            "1 job of another tenant" if hidden == 1 else f"{number(hidden)} jobs of other tenants"
        )
        names = shown + ([others] if hidden else [])
        where = counterfactual.get("fits_in")
        place = f" in {domain_text(where)}" if where else ""
        verb = "were" if len(shown) + hidden > 1 else "was"
        listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        parts.append(f"It would fit{place} if {listed} {verb} preempted.")
    for quota, missing in as_dict(counterfactual.get("quota_increase")).items():
        if isinstance(missing, Mapping) and missing:
            parts.append(f"It would run with {amounts_text(missing)} more in quota {quota}.")
    return " ".join(parts)


def _preemption_rule_words(cost: Mapping[str, Any]) -> str:
    """The rule the engine applied (`cost["rule"]`, recorded by `services.records`), in words
    that say whose priority is which; '' for a record without a rule this module knows."""
    rule = cost.get("rule")
    if rule == RULE_QUOTA_RECLAIM:
        return (
            "Took back quota that other quotas had borrowed beyond their guaranteed minimum: the"
            " preemptor's quota is still within its own minimum."
        )
    if rule not in (RULE_LOWER_PRIORITY, RULE_IN_QUOTA):
        return ""
    whom = "jobs"
    if rule == RULE_IN_QUOTA:
        whom = "jobs of its own quota, to make room within the quota"
    own, highest = cost.get("preemptor_priority"), cost.get("highest_victim_priority")
    if own is None or highest is None:
        return f"Evicted lower-priority {whom}."
    return (
        f"Evicted lower-priority {whom}: the preemptor has priority {own}, "
        f"the victims {highest} at most."
    )


def preemption_sentence(
    reason: str, cost: Mapping[str, Any] | None, *, preemptor_named: bool = True
) -> str:
    """A recorded preemption in words: the rule the engine applied (`cost["rule"]`), then why the
    preemptor did not fit without it (`reason`, the engine's words).

    Without `preemptor_named` (another team's preemptor, for a tenant) only the rule is said: the
    reason may name that team's quota. A record without a rule (older, not converted by migration
    0011) is said by its reason alone."""
    rule = _preemption_rule_words(as_dict(cost))
    reason = (reason or "").strip()
    if not preemptor_named or not reason:
        return rule or "Evicted to make room for it."
    why = decision_sentence("unschedulable", reason)
    if not rule:
        return why.sentence  # as recorded: it may start with a job's name
    if why.code == OTHER:
        return f"{rule} Without that it did not fit: {reason}"
    because = why.sentence[:1].lower() + why.sentence[1:]
    return f"{rule} Without that it did not fit, because {because}"
