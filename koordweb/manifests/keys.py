"""The Koordinator and scheduler-plugins label and annotation keys koordweb reads and writes."""

from __future__ import annotations

GANG_PREFIX = "gang.scheduling.koordinator.sh/"
GANG_NAME = GANG_PREFIX + "name"
GANG_MIN_AVAILABLE = GANG_PREFIX + "min-available"
GANG_TOTAL_NUMBER = GANG_PREFIX + "total-number"
GANG_MODE = GANG_PREFIX + "mode"
GANG_WAITING_TIME = GANG_PREFIX + "waiting-time"
GANG_GROUPS = GANG_PREFIX + "groups"
GANG_TOPOLOGY_SPEC = GANG_PREFIX + "network-topology-spec"
GANG_TOPOLOGY_INDEX = GANG_PREFIX + "network-topology-index"
GANG_ANNOTATIONS = (
    GANG_NAME,
    GANG_MIN_AVAILABLE,
    GANG_TOTAL_NUMBER,
    GANG_MODE,
    GANG_WAITING_TIME,
    GANG_GROUPS,
    GANG_TOPOLOGY_SPEC,
    GANG_TOPOLOGY_INDEX,
)

# scheduler-plugins PodGroup API groups and the pod label that joins a pod to its PodGroup.
POD_GROUP_APIS = {
    "scheduling.sigs.k8s.io/v1alpha1": "pod-group.scheduling.sigs.k8s.io",
    "scheduling.x-k8s.io/v1alpha1": "scheduling.x-k8s.io/pod-group",
}
DEFAULT_POD_GROUP_API = "scheduling.sigs.k8s.io/v1alpha1"
POD_GROUP_LABELS = tuple(POD_GROUP_APIS.values())

QUOTA_PREFIX = "quota.scheduling.koordinator.sh/"
QUOTA_NAME = QUOTA_PREFIX + "name"
QUOTA_PARENT = QUOTA_PREFIX + "parent"
QUOTA_IS_PARENT = QUOTA_PREFIX + "is-parent"
QUOTA_ALLOW_LENT = QUOTA_PREFIX + "allow-lent-resource"
QUOTA_SHARED_WEIGHT = QUOTA_PREFIX + "shared-weight"
# Koordinator's implicit root of the quota tree: a parent label naming it means "no parent".
ROOT_QUOTA = "koordinator-root-quota"

GPU_VENDOR_LABEL = "node.koordinator.sh/gpu-vendor"
GPU_MODEL_LABEL = "node.koordinator.sh/gpu-model"

# koordweb's own: how long a job runs once started, for simulation and replay.
DURATION_ANNOTATION = "koordweb.io/duration-seconds"

DEFAULT_WAITING_SECONDS = 600
# Koordinator's ElasticQuota annotation listing, as a JSON array, the namespaces whose pods may use
# the quota besides its own namespace (apis/extension/elastic_quota.go, AnnotationQuotaNamespaces).
QUOTA_NAMESPACES = QUOTA_PREFIX + "namespaces"
