"""Fluent builders for engine tests: clusters, nodes, gangs, running pods; they read like scenarios.

snap = (
    cluster()
    .topology(SPINE_BLOCK)
    .node(node("node-1").cpu(16).spine("s1").block("b1"))
    .running(pod("low-1").cpu(16).priority(1).on("node-1"))
    .submit(gang("default/train", pods=4).cpu(16).must_gather("SpineLayer").priority(1000))
    .snapshot()
)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

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
)
from scheduler.profile import Profile

# The engine's own plugins only (devices and load-aware are tested in tests/scheduler/devices).
CORE = Profile.default().without("DeviceShare", "LoadAware")
# The same in Koordinator's reference order (strict FIFO queue, emptiest nodes first).
REFERENCE = Profile.reference().without("DeviceShare", "LoadAware")

SPINE_LABEL = "network.topology.nvidia.com/spine"
BLOCK_LABEL = "network.topology.nvidia.com/block"
SPINE_BLOCK = TopologySpec(
    (
        TopologyLayerSpec("SpineLayer", None, (SPINE_LABEL,)),
        TopologyLayerSpec("BlockLayer", "SpineLayer", (BLOCK_LABEL,)),
        TopologyLayerSpec("NodeTopologyLayer", "BlockLayer"),
    )
)
GI = 1024**3


class node:
    def __init__(self, name: str) -> None:
        self.name = name
        self.alloc: dict[str, int] = {"pods": 110}
        self.labels: dict[str, str] = {}
        self.taints: list[Taint] = []
        self.cordoned = False

    def cpu(self, cores: float) -> node:
        self.alloc["cpu"] = int(cores * 1000)
        return self

    def memory(self, gib: int) -> node:
        self.alloc["memory"] = gib * GI
        return self

    def gpus(self, count: int) -> node:
        self.alloc["nvidia.com/gpu"] = count
        return self

    def resource(self, name: str, amount: int) -> node:
        self.alloc[name] = amount
        return self

    def label(self, key: str, value: str) -> node:
        self.labels[key] = value
        return self

    def spine(self, name: str) -> node:
        return self.label(SPINE_LABEL, name)

    def block(self, name: str) -> node:
        return self.label(BLOCK_LABEL, name)

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> node:
        self.taints.append(Taint(key, value, effect))  # type: ignore[arg-type]
        return self

    def unschedulable(self) -> node:
        self.cordoned = True
        return self

    def build(self) -> NodeInfo:
        return NodeInfo(
            self.name, dict(self.alloc), dict(self.labels), {}, tuple(self.taints), self.cordoned
        )


class pod:
    """A single pod; alone it is a job of its own ("ns/name"), `.job()` puts it in another."""

    def __init__(self, name: str, namespace: str = "default") -> None:
        self.fields: dict[str, Any] = {"namespace": namespace, "name": name, "requests": {}}
        self.fields["job_id"] = f"{namespace}/{name}"

    def cpu(self, cores: float) -> pod:
        self.fields["requests"]["cpu"] = int(cores * 1000)
        return self

    def gpu(self, count: int) -> pod:
        self.fields["requests"]["nvidia.com/gpu"] = count
        return self

    def request(self, name: str, amount: int) -> pod:
        self.fields["requests"][name] = amount
        return self

    def priority(self, value: int) -> pod:
        self.fields["priority"] = value
        return self

    def on(self, node_name: str) -> pod:
        self.fields["node"] = node_name
        self.fields["phase"] = "Running"
        return self

    def nominated(self, node_name: str) -> pod:
        self.fields["nominated_node"] = node_name
        return self

    def terminating(self) -> pod:
        self.fields["terminating"] = True
        return self

    def job(self, job_id: str) -> pod:
        self.fields["job_id"] = job_id
        return self

    def label(self, key: str, value: str) -> pod:
        self.fields.setdefault("labels", {})[key] = value
        return self

    def quota(self, name: str) -> pod:
        self.fields["quota"] = name
        return self

    def never_preempt(self) -> pod:
        self.fields["preemption_policy"] = "Never"
        return self

    def select(self, key: str, value: str) -> pod:
        self.fields.setdefault("node_selector", {})[key] = value
        return self

    def affinity(self, key: str, operator: str, *values: str) -> pod:
        req = NodeSelectorRequirement(key, operator, tuple(values))  # type: ignore[arg-type]
        terms = self.fields.get("required_affinity", ())
        if terms:
            only = terms[0]
            terms = (NodeSelectorTerm((*only.match_expressions, req)),)
        else:
            terms = (NodeSelectorTerm((req,)),)
        self.fields["required_affinity"] = terms
        return self

    def tolerate(self, key: str = "", operator: str = "Exists", value: str = "") -> pod:
        tol = Toleration(key, operator, value)  # type: ignore[arg-type]
        self.fields["tolerations"] = (*self.fields.get("tolerations", ()), tol)
        return self

    def build(self) -> PodInfo:
        return PodInfo(**self.fields)


class gang:
    """A gang (one PodGroup) of identical pods named "<name>-1".. in its namespace."""

    def __init__(self, gang_id: str, pods: int, min_available: int | None = None) -> None:
        self.namespace, self.name = gang_id.split("/")
        self.id = gang_id
        self.count = pods
        self.min_available = pods if min_available is None else min_available
        self.template = pod("x", self.namespace)
        self.gather: list[LayerGather] = []
        self.multiple = 1
        self.prio = 0
        self.mode = "Strict"
        self.pod_names: list[str] | None = None
        self.submitted = 0.0
        self.quota_name: str | None = None

    def cpu(self, cores: float) -> gang:
        self.template.cpu(cores)
        return self

    def gpu(self, count: int) -> gang:
        self.template.gpu(count)
        return self

    def request(self, name: str, amount: int) -> gang:
        self.template.request(name, amount)
        return self

    def priority(self, value: int) -> gang:
        self.prio = value
        self.template.priority(value)
        return self

    def must_gather(self, layer: str) -> gang:
        self.gather.append(LayerGather(layer, "MustGather"))
        return self

    def prefer_gather(self, layer: str) -> gang:
        self.gather.append(LayerGather(layer, "PreferGather"))
        return self

    def pod_count_multiple(self, n: int) -> gang:
        self.multiple = n
        return self

    def never_preempt(self) -> gang:
        self.template.never_preempt()
        return self

    def select(self, key: str, value: str) -> gang:
        self.template.select(key, value)
        return self

    def quota(self, name: str) -> gang:
        self.quota_name = name
        self.template.quota(name)
        return self

    def named(self, *names: str) -> gang:
        self.pod_names = list(names)
        self.count = len(names)
        return self

    def submitted_at(self, order: float) -> gang:
        self.submitted = order
        return self

    def pods(self) -> list[PodInfo]:
        names = self.pod_names or [f"{self.name}-{i}" for i in range(1, self.count + 1)]
        base = self.template.build()
        return [
            replace(base, name=n, job_id=self.id, gang_id=self.id, quota=self.quota_name)
            for n in names
        ]

    def build(self) -> tuple[JobInfo, list[PodInfo]]:
        pods = self.pods()
        rule = TopologyRule(tuple(self.gather), self.multiple) if self.gather else None
        job = JobInfo(
            id=self.id,
            pod_keys=tuple(p.key for p in pods),
            gangs=(GangInfo(self.id, self.min_available, self.count, self.mode),),  # type: ignore[arg-type]
            priority=self.prio,
            quota=self.quota_name,
            topology=rule,
            submission_order=self.submitted,
            preemption_policy=pods[0].preemption_policy,
        )
        return job, pods


class cluster:
    def __init__(self) -> None:
        self.nodes: list[NodeInfo] = []
        self.pods: list[PodInfo] = []
        self.jobs: list[JobInfo] = []
        self.quotas: list[QuotaInfo] = []
        self.pdbs: list[PDBInfo] = []
        self.spec: TopologySpec | None = None

    def topology(self, spec: TopologySpec) -> cluster:
        self.spec = spec
        return self

    def node(self, *builders: node) -> cluster:
        self.nodes.extend(b.build() for b in builders)
        return self

    def running(self, *builders: pod) -> cluster:
        self.pods.extend(b.build() for b in builders)
        return self

    def submit(self, *gangs: gang | pod) -> cluster:
        for g in gangs:
            if isinstance(g, pod):
                self.pods.append(g.build())
                continue
            job, pods = g.build()
            self.jobs.append(job)
            self.pods.extend(pods)
        return self

    def quota(self, q: QuotaInfo) -> cluster:
        self.quotas.append(q)
        return self

    def pdb(self, budget: PDBInfo) -> cluster:
        self.pdbs.append(budget)
        return self

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(
            tuple(self.nodes),
            tuple(self.pods),
            tuple(self.jobs),
            tuple(self.quotas),
            tuple(self.pdbs),
            self.spec,
        )


def t8(*extra: pod) -> cluster:
    """koordinator.md fixture T8: 8 x 16 CPU; s1 = {b1: 1,8; b2: 2,7}; s2 = {b3: 3,6; b4: 4,5}."""
    layout = {1: ("s1", "b1"), 8: ("s1", "b1"), 2: ("s1", "b2"), 7: ("s1", "b2")}
    layout |= {3: ("s2", "b3"), 6: ("s2", "b3"), 4: ("s2", "b4"), 5: ("s2", "b4")}
    c = cluster().topology(SPINE_BLOCK)
    for i in range(1, 9):
        s, b = layout[i]
        c.node(node(f"node-{i}").cpu(16).memory(64).spine(s).block(b))
    return c.running(*extra)


def nodes_of(result: Any, job_pods: list[str]) -> list[str]:
    return [result.placements[k].node for k in job_pods]
