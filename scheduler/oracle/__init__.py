"""An oracle for scheduling rounds, written apart from the engine.

`check_round(snapshot, result, profile_rules=None)` lists what a round's answer breaks, each
rule implemented here from kube-scheduler's predicate definitions (TaintToleration,
NodeUnschedulable, NodeAffinity with the nodeSelector, NodeResourcesFit and nominated pods) and
Koordinator v1.7's semantics (gangs, network topology, devices, preemption, elastic quota), never
with the engine's plugins or framework (an import-linter contract keeps it so): a rule the engine
gets wrong is not wrong here the same way. `rules_for_plugins` gives the rules a profile's
plugins keep. The modules: violation (the report and rule codes), view (the round indexed),
node_rules, resources, devices, gangs, preemption, quotas, check.
"""

from scheduler.oracle.check import RULES, check_round
from scheduler.oracle.quotas import runtime_quota
from scheduler.oracle.violation import ALL_RULES, PLUGIN_OF, Violation, rules_for_plugins

__all__ = [
    "ALL_RULES",
    "PLUGIN_OF",
    "RULES",
    "Violation",
    "check_round",
    "rules_for_plugins",
    "runtime_quota",
]
