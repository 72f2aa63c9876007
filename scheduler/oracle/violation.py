"""What the oracle reports: one `Violation` per broken rule, and the rule codes.

A rule code names the rule, not the engine's plugin that should have kept it; `PLUGIN_OF` says
which plugin of a profile enforces each one, so a caller whose profile leaves a plugin out can
skip the rules that plugin alone keeps (`rules_for_plugins`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

PLACEMENT: Final = "Placement"
TAINT_TOLERATION: Final = "TaintToleration"
NODE_UNSCHEDULABLE: Final = "NodeUnschedulable"
NODE_AFFINITY: Final = "NodeAffinity"
RESOURCE_FIT: Final = "NodeResourcesFit"
NOMINATED_PODS: Final = "NominatedPods"
DEVICE_CARDS: Final = "DeviceCards"
GPU_PARTITION: Final = "GPUPartition"
GANG: Final = "Gang"
MUST_GATHER: Final = "MustGather"
VICTIMS: Final = "Victims"
QUOTA: Final = "Quota"

# Rule code -> the plugin that keeps it (None: every profile, the result's own consistency).
PLUGIN_OF: Final[dict[str, str | None]] = {
    PLACEMENT: None,
    TAINT_TOLERATION: "TaintToleration",
    NODE_UNSCHEDULABLE: "NodeUnschedulable",
    NODE_AFFINITY: "NodeAffinity",
    RESOURCE_FIT: "NodeResourcesFit",
    # The room nominated pods hold is resource room: without NodeResourcesFit nothing checks it.
    NOMINATED_PODS: "NodeResourcesFit",
    DEVICE_CARDS: "DeviceShare",
    GPU_PARTITION: "DeviceShare",
    GANG: "Coscheduling",
    MUST_GATHER: "NetworkTopology",
    VICTIMS: "JobPreemption",
    QUOTA: "ElasticQuota",
}
ALL_RULES: Final = frozenset(PLUGIN_OF)


def rules_for_plugins(plugins: Iterable[str]) -> frozenset[str]:
    """The rules a profile made of `plugins` (names) must keep."""
    enabled = set(plugins)
    return frozenset(
        rule for rule, plugin in PLUGIN_OF.items() if plugin is None or plugin in enabled
    )


@dataclass(frozen=True)
class Violation:
    """One broken rule: its code, the job and pod concerned ("" when none), the node and why."""

    rule: str
    job: str
    pod: str
    node: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"
