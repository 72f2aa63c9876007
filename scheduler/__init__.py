"""The scheduling engine: a pure-Python library on numpy, no Django, no clock, no I/O.

Entry points: `plan_round(snapshot, profile=None) -> RoundResult` for one round,
`apply_round` / `run_rounds` to simulate a cluster that obeys, `Profile.default()` for the
reference plugin set (`Profile.configured(config, registry)` for a cluster's configuration,
out-of-tree plugins included). Input types live in `scheduler.model`; the extension points, their
Protocols and the `Handle` in `scheduler.framework`; the guide is docs/plugins.md.
"""

from scheduler.apply import apply_round, run_rounds
from scheduler.model import (
    ClusterSnapshot,
    GangInfo,
    JobInfo,
    LayerGather,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PDBInfo,
    PodInfo,
    QuotaInfo,
    Taint,
    Toleration,
    TopologyLayerSpec,
    TopologyRule,
    TopologySpec,
    gang_group_id,
)
from scheduler.profile import PluginSpec, Profile
from scheduler.result import (
    Cause,
    JobVerdict,
    NodeReason,
    Placement,
    PreemptionRecord,
    RoundResult,
)
from scheduler.round import plan_round

__all__ = [
    "Cause",
    "ClusterSnapshot",
    "GangInfo",
    "JobInfo",
    "JobVerdict",
    "LayerGather",
    "NodeInfo",
    "NodeReason",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PDBInfo",
    "Placement",
    "PluginSpec",
    "PodInfo",
    "PreemptionRecord",
    "Profile",
    "QuotaInfo",
    "RoundResult",
    "Taint",
    "Toleration",
    "TopologyLayerSpec",
    "TopologyRule",
    "TopologySpec",
    "apply_round",
    "gang_group_id",
    "plan_round",
    "run_rounds",
]
