"""Validated manifest objects: what parsing produces and applying writes, with no database access.

A `ParsedObject` holds the model field values of one document, the names it refers to (a node, a
parent quota, a priority class) and, for CRs that expand into several rows (Device, topology), the
child rows. A `JobPlan` is one Job to create from a PodGroup, an annotation gang or a lone pod.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# Kubernetes kinds as they appear in `kind:`; also the keys of the import summary.
NODE = "Node"
POD = "Pod"
POD_GROUP = "PodGroup"
PRIORITY_CLASS = "PriorityClass"
PDB = "PodDisruptionBudget"
TOPOLOGY = "ClusterNetworkTopology"
DEVICE = "Device"
QUOTA = "ElasticQuota"
NODE_METRIC = "NodeMetric"
CONFIG_MAP = "ConfigMap"


@dataclass
class ParsedObject:
    """One document, validated: `values` are model field values, `refs` names to resolve."""

    index: int
    kind: str
    namespace: str
    name: str
    values: dict[str, Any] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    # What is not a model field: a pod's gang settings, the job it joins.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass
class JobPlan:
    """A Job row to create and the pods that make it up.

    `index` is the document that defines the job (the PodGroup, or its first pod). A PodGroup job
    whose PodGroup is not in this import (`existing=True`) receives pods into the stored job.
    """

    index: int
    namespace: str
    name: str
    kind: str
    values: dict[str, Any] = field(default_factory=dict)
    quota_name: str = ""
    pods: list[ParsedObject] = field(default_factory=list)
    existing: bool = False

    @property
    def gang_id(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class ManifestSet:
    """Everything one import brings, validated, in document order, with the jobs built."""

    objects: list[ParsedObject] = field(default_factory=list)
    jobs: list[JobPlan] = field(default_factory=list)
    # Documents of kinds koordweb does not use (a cluster dump's Services, Events, ...): kind ->
    # how many were skipped.
    skipped: Counter[str] = field(default_factory=Counter)
    # What the import as a whole warns of (a gang none of whose pods Koordinator can read).
    notes: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[ParsedObject]:
        return [obj for obj in self.objects if obj.kind == kind]

    @property
    def warnings(self) -> list[str]:
        """What an import accepts but does not apply (unsupported scheduler arguments, gang
        settings Koordinator would not use and replaces by its defaults)."""
        found = [obj.extra["warning"] for obj in self.objects if obj.extra.get("warning")]
        found += [text for obj in self.objects for text in obj.extra.get("warnings", ())]
        found += self.notes
        if self.skipped:
            kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(self.skipped.items()))
            total = sum(self.skipped.values())
            found.append(f"skipped {total} documents of kinds koordweb does not use: {kinds}")
        return found

    def counts(self) -> dict[str, int]:
        """How many documents of each kind, plus the jobs built ("Job")."""
        counts = Counter(obj.kind for obj in self.objects)
        new_jobs = sum(1 for plan in self.jobs if not plan.existing)
        if new_jobs:
            counts["Job"] = new_jobs
        return dict(sorted(counts.items()))
