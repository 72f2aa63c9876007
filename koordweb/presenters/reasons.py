"""Engine decisions in plain sentences: one reason code and one sentence per case.

The engine answers with a status code, a message in Koordinator's words and structured details
(`scheduler/result.py`: `desired_offer_slots`, `domain_offer_slots`, `node_reasons`,
`quota_shortfall`, `counterfactual`, `preemption`, `plugin`, ...; placed jobs: `chosen_domain`,
`chosen_offer_slots`, `alternatives`). `reason_code` names the case, `decision_sentence` says it,
`details.detail_lines` lists the details for the "details" disclosure. Pages, the API's
`explain` and the what-if page all call these; nothing else turns engine output into words.

The engine names each case itself (`details["cause"]`: a code, its plugin, the numbers behind it
and the per-node reasons as codes, `scheduler.result.Cause`; the preemption plugin's answer in
`details["preemption"]` the same way), and the sentences are formatted from those codes and
numbers only: the engine's message is never read. A decision recorded before the engine gave a
cause keeps its case (from its plugin) and is said by its recorded message, as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordweb.presenters.details import (
    detail_lines,
    plugin_text,
    preemption_status_sentence,
    recorded_sentence,
)
from koordweb.presenters.quantities import amounts_text, number, quantity_text, resource_name
from koordweb.presenters.words import (
    as_dict,
    domain_text,
    layer_word,
    nodes_ruled_out,
    pods,
)
from scheduler.api import RULE_IN_QUOTA, RULE_LOWER_PRIORITY, RULE_QUOTA_RECLAIM, causes

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
    causes.TOPOLOGY_NO_DOMAIN: TOPOLOGY,
    causes.NODES_UNAVAILABLE: NODE_RESOURCES,
    causes.SHAPES_DO_NOT_FIT: NODE_RESOURCES,
    causes.QUOTA_INSUFFICIENT: QUOTA,
    causes.NON_PREEMPTIBLE_QUOTA_INSUFFICIENT: QUOTA,
    causes.GANG_INCOMPLETE: GANG_WAITING,
    causes.GANG_SHORT: GANG_SHORT,
    causes.TOPOLOGY_INVALID: INVALID,
    causes.TOPOLOGY_UNKNOWN_LAYER: INVALID,
    causes.POD_COUNT_NOT_MULTIPLE: INVALID,
    causes.DEVICE_REQUEST_INVALID: INVALID,
    causes.DEVICES_UNFIT: DEVICES,
}
# The plugin that refused -> the case, for a code this module does not know and for decisions
# recorded before the engine gave a cause (the gang's two cases told apart by their details).
_PLUGINS = {
    "NetworkTopology": TOPOLOGY,
    "NodeResourcesFit": NODE_RESOURCES,
    "ElasticQuota": QUOTA,
    "DeviceShare": DEVICES,
}
# The cases said from the cause's numbers: without a cause, the recorded message is said.
_FROM_CAUSE = frozenset({TOPOLOGY, NODE_RESOURCES, QUOTA, GANG_WAITING, GANG_SHORT, DEVICES})

# koordweb's own words for a job no shape of which can ever fit (`views.jobs`), not the engine's.
NEVER_FITS_PREFIX = "can never run: "


@dataclass(frozen=True)
class Explanation:
    code: str
    sentence: str
    details: tuple[tuple[str, str], ...] = ()


def reason_code(outcome: str | None, reason: str | None, details: Mapping[str, Any]) -> str:
    """Which case a decision is: one of the module's codes, from the engine's codes and the
    plugin that decided (never from its message)."""
    preemption = as_dict(details.get("preemption"))
    if (reason or "").startswith(NEVER_FITS_PREFIX) or details.get("never_fits"):
        return NEVER_FITS
    if outcome == "placed":
        return PLACED_NOMINATED if details.get("nominated") else PLACED
    if not outcome:
        return NOT_DECIDED
    if outcome == "preempting":
        return PREEMPTING
    answered = preemption.get("cause") or preemption.get("status")  # recorded: its status code
    if answered in (causes.VICTIMS_TERMINATING, "Wait"):
        return VICTIMS_TERMINATING
    cause = as_dict(details.get("cause"))
    if str(cause.get("code")) in _CAUSES:
        return _CAUSES[str(cause.get("code"))]
    plugin = str(cause.get("plugin") or details.get("plugin") or "")
    if plugin == "Coscheduling":
        if "reached" in details:
            return GANG_SHORT
        waiting = "pods" in details and "min_available" in details
        return GANG_WAITING if waiting or outcome == "waiting" else GANG_SHORT
    return _PLUGINS.get(plugin, OTHER)


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
    if (
        code in _FROM_CAUSE
        and not as_dict(details.get("cause"))
        and not _quota_named(code, details)
    ):
        # Recorded before the engine gave a cause: the case in plain words, without numbers
        # (the engine's message is in Koordinator's words, which a page never shows).
        sentence = _WITHOUT_CAUSE[code]
    else:
        sentence = _SENTENCES[code](reason or "", details, state)
    extra = _preemption_sentence(code, details)
    if extra:
        sentence = f"{sentence} {extra}"
    return Explanation(code, sentence, tuple(detail_lines(details)))


_WITHOUT_CAUSE = {
    TOPOLOGY: "No topology domain had room for the whole job together.",
    NODE_RESOURCES: "No node had enough free resources for its pods.",
    QUOTA: "Its quota had too little left for it.",
    GANG_WAITING: "Waiting for the rest of its gang's pods.",
    GANG_SHORT: "Not enough of the gang's pods would fit at once.",
    DEVICES: "No node had the devices its pods ask for free.",
}


def _quota_named(code: str, details: Mapping[str, Any]) -> bool:
    """A quota decision whose details name the quota (and its shortfall, as numbers): said from
    those even when recorded before the engine gave a cause."""
    return code == QUOTA and bool(details.get("quota"))


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


def _cause(d: Mapping[str, Any]) -> dict[str, Any]:
    return as_dict(d.get("cause"))


def _values(d: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers behind the engine's cause."""
    return as_dict(_cause(d).get("values"))


def _topology(reason: str, d: dict[str, Any], state: str) -> str:
    """The job's own size and the layer whose one domain must hold it, from the engine."""
    v = _values(d)
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
    cause = _cause(d)
    v = as_dict(cause.get("values"))
    if cause.get("code") == causes.SHAPES_DO_NOT_FIT:
        return "Its pods of different shapes do not all fit the nodes that have room for them."
    text = ""
    if "available_nodes" in v and "total_nodes" in v:
        text = (
            f"{number(int(v['available_nodes']))} of {number(int(v['total_nodes']))} nodes"
            " can take one of its pods"
        )
    why = nodes_ruled_out(cause.get("node_reasons"))
    if why:
        text = f"{text}; the others: {why}" if text else f"Nodes ruled out: {why}"
    room, needed = v.get("offer_slots"), v.get("pods", v.get("job_pods"))
    if room is not None and needed is not None:
        text += f". Together they have room for {pods(room)}, the job needs {pods(needed)}"
    return (text or "No node has room for the job's pods") + "."


def _quota(reason: str, d: dict[str, Any], state: str) -> str:
    cause = _cause(d)
    quota = str(as_dict(cause.get("values")).get("quota") or d.get("quota") or "")
    dims = d.get("exceeded_dimensions") or []
    names = ", ".join(resource_name(str(r)) for r in dims)
    if cause.get("code") == causes.NON_PREEMPTIBLE_QUOTA_INSUFFICIENT:
        return (
            f"Quota {quota} has too little of its guaranteed minimum left for pods that may not "
            f"be preempted{f' ({names})' if names else ''}."
        )
    shortfall = as_dict(as_dict(d.get("quota_shortfall")).get(quota))
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
    return f"Quota {quota} has too little left{f' of {names}' if names else ''}."


def _gang_waiting(reason: str, d: dict[str, Any], state: str) -> str:
    v = _values(d)
    if "pods" in v and "min_available" in v:
        return (
            f"Waiting for its gang: {number(int(v['pods']))} of the "
            f"{number(int(v['min_available']))} pods it needs exist."
        )
    return "Waiting for the rest of its gang's pods."


def _gang_short(reason: str, d: dict[str, Any], state: str) -> str:
    v = _values(d)
    if "reached" in v and "min_available" in v:
        return (
            f"Only {pods(int(v['reached']))} would fit at once; the gang needs "
            f"{pods(int(v['min_available']))} together."
        )
    return "Not enough of the gang's pods would fit at once."


def _victims_terminating(reason: str, d: dict[str, Any], state: str) -> str:
    values = as_dict(as_dict(d.get("preemption")).get("values"))
    nodes = [str(n) for n in values.get("nodes") or []]
    where = f" on {', '.join(nodes)}" if nodes else ""
    return f"Waiting for the pods it preempted to terminate{where}."


def _preempting(reason: str, d: dict[str, Any], state: str) -> str:
    victims = len(as_dict(d.get("nominations")))
    text = "Preempting lower-priority jobs to make room"
    return text + (f"; {pods(victims)} will start on the freed nodes." if victims else ".")


_CARD_WORDS = {"gpu": "cards", "rdma": "RDMA NICs", "fpga": "FPGAs"}


def _devices(reason: str, d: dict[str, Any], state: str) -> str:
    cause = _cause(d)
    v = as_dict(cause.get("values"))
    if cause.get("code") != causes.DEVICES_UNFIT:
        return _other(reason, d, state)
    where = f" for pod {v['pod']} on {v['node']}" if v.get("pod") and v.get("node") else ""
    text = f"No free cards fit the request{where}"
    if "needed" in v and "free" in v:
        what = _CARD_WORDS.get(str(v.get("resource")), "cards")
        text += f": it needs {number(int(v['needed']))} {what}, {number(int(v['free']))} fit"
        if "cards" in v:
            text += f" of the node's {number(int(v['cards']))}"
    elif v.get("refusal"):
        text += f": {v['refusal']}"
    return text + "."


def _invalid(reason: str, d: dict[str, Any], state: str) -> str:
    cause = _cause(d)
    code, v = cause.get("code"), as_dict(cause.get("values"))
    if code == causes.TOPOLOGY_UNKNOWN_LAYER:
        unknown = ", ".join(str(layer) for layer in v.get("unknown_layers") or [])
        known = ", ".join(layer_word(str(layer)) for layer in v.get("cluster_layers") or [])
        text = f"Its topology rule names layers the cluster does not have ({unknown})"
        return text + (f"; the cluster has: {known}." if known else ".")
    if code == causes.POD_COUNT_NOT_MULTIPLE:
        return (
            f"Its {pods(v.get('pods') or v.get('job_pods') or 0)} to place are not a multiple "
            f"of {number(int(v.get('pod_count_multiple') or 0))}, as its topology rule asks."
        )
    if code == causes.TOPOLOGY_INVALID:
        error = str(v.get("error") or "").strip().rstrip(".")
        return "The cluster's network topology is invalid" + (f": {error}." if error else ".")
    if code == causes.DEVICE_REQUEST_INVALID:
        problems = "; ".join(str(p) for p in v.get("problems") or [])
        where = f" (pod {v['pod']})" if v.get("pod") else ""
        return f"Its card request is invalid{where}" + (f": {problems}." if problems else ".")
    return _other(reason, d, state)


def _never_fits(reason: str, d: dict[str, Any], state: str) -> str:
    text = reason.removeprefix(NEVER_FITS_PREFIX) or str(d.get("never_fits") or "")
    return f"Can never run: {text}."


def _not_decided(reason: str, d: dict[str, Any], state: str) -> str:
    if state == "Pending":
        return "Waiting for the next scheduling round."
    text = (reason or state or "—").strip().rstrip(".")
    return f"{text[:1].upper()}{text[1:]}."


def _other(reason: str, d: dict[str, Any], state: str) -> str:
    """A cause this module has no sentence for (a plugin added later): who refused, and its
    message as it is."""
    plugin = str(_cause(d).get("plugin") or d.get("plugin") or "")
    if not plugin:
        # No plugin and no cause (recorded by an older version): its message is in the
        # engine's words, which a page never shows.
        return "Not placed this round."
    said = recorded_sentence(f"Not placed by {plugin_text(plugin)}", reason)
    return said or f"Not placed by {plugin_text(plugin)}."


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
        opening = _first_word(reason).lower()
        text = sentence if opening in said else f"{text} {sentence}"
    return Explanation(f"state-{state.lower()}", text)


def _first_word(text: str) -> str:
    """The text up to its first space or one of '(:,;'."""
    for i, char in enumerate(text):
        if char.isspace() or char in "(:,;":
            return text[:i]
    return text


def _preemption_sentence(code: str, details: Mapping[str, Any]) -> str:
    """Why preempting did not help, when the engine tried."""
    if code in (PLACED, PLACED_NOMINATED, PREEMPTING, VICTIMS_TERMINATING, NOT_DECIDED):
        return ""
    preemption = as_dict(details.get("preemption"))
    if not preemption or preemption.get("cause") == causes.PREEMPTING:
        return ""
    return preemption_status_sentence(preemption)


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
    """The rule the engine applied (`cost["rule"]`, recorded by `koordweb.engine.records`), in words
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
    preemptor did not fit without it, from the cause the engine gave (`cost["cause"]`, the
    preemptor's `Cause` as its verdict carries it); a record without a cause says the rule only
    (its `reason` is in the engine's words).

    Without `preemptor_named` (another team's preemptor, for a tenant) only the rule is said: the
    reason may name that team's quota. A record without a rule (older, not converted by migration
    0011) is said by its reason alone."""
    cost = as_dict(cost)
    rule = _preemption_rule_words(cost)
    reason = (reason or "").strip()
    if not preemptor_named or not reason:
        return rule or "Evicted to make room for it."
    cause = as_dict(cost.get("cause"))
    if not cause:
        # Recorded before the engine gave the preemptor's cause: its reason is in the engine's
        # words, which a page never shows.
        return f"{rule} Without that it did not fit." if rule else "Evicted to make room for it."
    why = decision_sentence("unschedulable", reason, {"cause": cause})
    if not rule:
        return why.sentence
    because = why.sentence[:1].lower() + why.sentence[1:]
    return f"{rule} Without that it did not fit, because {because}"
