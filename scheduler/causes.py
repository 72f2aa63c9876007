"""The cause vocabulary: the stable codes the engine's answers carry, and a failure as a `Cause`.

A plugin that refuses a job or a node says why three ways: its words (`Status.reason`,
`NodeMask.reason`, `Refusal.text`), the structured data and a code from here with the numbers
behind it (`Status.values`). The round hands the code and the numbers on as they are
(`failure_cause`), so neither the engine nor the web ever turns the words back into a code
(docs/plugins.md, "Reasons"). Plugins outside the tree may give codes of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from scheduler.result import Cause, NodeReason

if TYPE_CHECKING:
    from scheduler.framework import Failure

# --- why a job was not placed (`Status.cause`, `Cause.code`) ---------------------------------
TOPOLOGY_NO_DOMAIN: Final = "TopologyNoDomain"  # no domain of the gather layer holds the job
NODES_UNAVAILABLE: Final = "NodesUnavailable"  # the nodes together do not offer enough slots
SHAPES_DO_NOT_FIT: Final = "PodShapesDoNotFit"  # pods of several shapes do not fit the plan
QUOTA_INSUFFICIENT: Final = "QuotaInsufficient"
NON_PREEMPTIBLE_QUOTA_INSUFFICIENT: Final = "NonPreemptibleQuotaInsufficient"
GANG_INCOMPLETE: Final = "GangIncomplete"  # fewer pods exist than the gang's min-available
GANG_SHORT: Final = "GangShort"  # fewer would fit at once than the gang's min-available
TOPOLOGY_INVALID: Final = "TopologyInvalid"
TOPOLOGY_UNKNOWN_LAYER: Final = "TopologyUnknownLayer"
POD_COUNT_NOT_MULTIPLE: Final = "PodCountNotMultiple"
DEVICE_REQUEST_INVALID: Final = "DeviceRequestInvalid"
DEVICES_UNFIT: Final = "DevicesUnfit"  # a planned node's cards could not be allocated

# --- what the preemption plugin answered (`details["preemption"]["cause"]`) -----------------
PREEMPTING: Final = "Preempting"
VICTIMS_TERMINATING: Final = "VictimsTerminating"
NO_VICTIMS: Final = "NoVictims"
PREEMPTION_NOT_HELPFUL: Final = "PreemptionNotHelpful"
PREEMPTION_NEVER: Final = "PreemptionNever"
BLOCKED_BY_DISRUPTION_BUDGET: Final = "BlockedByDisruptionBudget"

# --- why a Filter ruled a node out (`Refusal.code`, `NodeReason.code`) ----------------------
INSUFFICIENT: Final = "Insufficient"  # too little of `resource` free
TOO_MANY_PODS: Final = "TooManyPods"  # no pod slot left
NODE_CORDONED: Final = "NodeUnschedulable"
NODE_AFFINITY: Final = "NodeAffinityMismatch"  # the pod's node selector or affinity excludes it
TAINT_UNTOLERATED: Final = "TaintUntolerated"
METRIC_EXPIRED: Final = "NodeMetricExpired"  # LoadAware: the node's usage report is out of date
LOAD_OVER_THRESHOLD: Final = "LoadOverThreshold"  # LoadAware: `resource` use over its threshold
AGGREGATED_LOAD_OVER_THRESHOLD: Final = "AggregatedLoadOverThreshold"
NODE_REJECTED: Final = "NodeRejected"  # any other reason: its words are in `text`


def failure_cause(failure: Failure, job_pods: int) -> Cause:
    """The failure as a `Cause`: the status's code (the plugin's, else the status code), the
    numbers behind it (the status's plain values, its `values`, the cycle's) and the per-node
    reasons, each as its Filter coded it."""
    status = failure.status
    values: dict[str, Any] = {
        k: v for k, v in status.details.items() if isinstance(v, (int, float, str, bool))
    }
    values.update(status.values)
    values.update(failure.values)
    values["job_pods"] = job_pods
    domains: Mapping[str, int] = status.details.get("domain_offer_slots") or {}
    if domains:
        room = max(domains.values())
        best = max(label for label, slots in domains.items() if slots == room)
        values.update(domains=len(domains), best_domain=best, best_offer_slots=int(room))
    node_reasons = tuple(
        NodeReason(refusal.code, nodes, plugin, refusal.text, refusal.resource)
        for plugin, told in failure.explained.items()
        for refusal, nodes in sorted(told.items(), key=lambda item: (-item[1], item[0].text))
    )
    return Cause(status.cause or status.code.value, status.plugin, values, node_reasons)
