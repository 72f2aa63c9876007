"""The cluster data model (product.md M1): ORM only, no services, tasks, API or views."""

from koordweb.models.affinity import ClusterLease, RoundWorker
from koordweb.models.cluster import (
    Cluster,
    Device,
    DeviceTemplateConfig,
    Node,
    NodeMetric,
    TopologyLayer,
    latest_node_metric_ids,
)
from koordweb.models.gpu_usage import CARD_HOUR, CardSample, JobGpuState, JobUsageHour
from koordweb.models.outbox import Intent
from koordweb.models.quota_history import QuotaChange
from koordweb.models.records import Decision, Preemption, PreemptionVictim, Round
from koordweb.models.workload import (
    ElasticQuota,
    Job,
    JobState,
    Pod,
    PodDisruptionBudget,
    PodPhase,
    PriorityClass,
    job_state_from_pods,
)

__all__ = [
    "CARD_HOUR",
    "CardSample",
    "Cluster",
    "ClusterLease",
    "Decision",
    "Device",
    "DeviceTemplateConfig",
    "ElasticQuota",
    "Intent",
    "Job",
    "JobGpuState",
    "JobState",
    "JobUsageHour",
    "Node",
    "NodeMetric",
    "Pod",
    "PodDisruptionBudget",
    "PodPhase",
    "Preemption",
    "PreemptionVictim",
    "PriorityClass",
    "QuotaChange",
    "Round",
    "RoundWorker",
    "TopologyLayer",
    "job_state_from_pods",
    "latest_node_metric_ids",
]
