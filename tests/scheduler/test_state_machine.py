"""A hypothesis state machine over the life of a cluster: submit, round (with preemption),
finish, cancel, node down, quota change. After every round: no resource over-allocated, gangs
all or nothing, MustGather honoured, victims strictly lower priority (or a quota reclaim) and never
protected, quota runtime never exceeded by admission, every eviction recorded as a preemption."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from scheduler import ClusterSnapshot, QuotaInfo, apply_round, plan_round
from scheduler.model import GangInfo, JobInfo, LayerGather, PodInfo, TopologyRule
from tests.oracle.asserts import PROTECT, check_invariants
from tests.scheduler.builders import CORE, SPINE_BLOCK, cluster, node

QUOTAS = ("qa", "qb")


class ClusterLife(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        c = cluster().topology(SPINE_BLOCK)
        for i in range(6):
            c.node(node(f"n{i}").cpu(8).gpus(4).spine(f"s{i % 2}").block(f"b{i % 3}"))
        c.quota(QuotaInfo("qa", {"cpu": 8000}, {"cpu": 32000}))
        c.quota(QuotaInfo("qb", {"cpu": 8000}, {"cpu": 48000}))
        self.snap: ClusterSnapshot = c.snapshot()
        self.serial = 0
        self.rounds = 0

    # --- what happens to a cluster ---------------------------------------------------------
    @rule(
        pods=st.integers(1, 4),
        cpu=st.sampled_from([1, 2, 4, 8]),
        gpu=st.sampled_from([0, 0, 1, 2]),
        priority=st.integers(0, 5),
        quota=st.sampled_from([None, *QUOTAS]),
        layer=st.sampled_from([None, "BlockLayer", "SpineLayer"]),
        protected=st.booleans(),
    )
    def submit(
        self,
        pods: int,
        cpu: int,
        gpu: int,
        priority: int,
        quota: str | None,
        layer: str | None,
        protected: bool,
    ) -> None:
        self.serial += 1
        job_id = f"ml/j{self.serial}"
        requests = {"cpu": cpu * 1000, **({"nvidia.com/gpu": gpu} if gpu else {})}
        members = tuple(
            PodInfo(
                namespace="ml",
                name=f"j{self.serial}-{i}",
                job_id=job_id,
                gang_id=job_id,
                requests=requests,
                priority=priority,
                quota=quota,
                labels={PROTECT: "true"} if protected else {},
            )
            for i in range(pods)
        )
        job = JobInfo(
            id=job_id,
            pod_keys=tuple(p.key for p in members),
            gangs=(GangInfo(job_id, pods, pods),),
            priority=priority,
            quota=quota,
            topology=TopologyRule((LayerGather(layer, "MustGather"),)) if layer else None,
            submission_order=float(self.serial),
        )
        self.snap = replace(self.snap, pods=self.snap.pods + members, jobs=(*self.snap.jobs, job))

    @rule()
    def round(self) -> None:
        result = plan_round(self.snap, CORE)
        check_invariants(self.snap, result)
        recorded = {key for record in result.preemptions for key in record.victim_pods}
        nominated = {key for record in result.preemptions for key in record.nominations}
        assert not recorded & set(result.placements), "a victim placed in its own round"
        preemptors = {record.preemptor for record in result.preemptions}
        assert all(key.rsplit("-", 1)[0].replace("ml/", "ml/") for key in nominated)
        assert preemptors <= {j.id for j in self.snap.jobs}
        before = {p.key for p in self.snap.pods}
        self.snap = apply_round(self.snap, result, now=float(self.rounds))
        gone = before - {p.key for p in self.snap.pods}
        assert gone == recorded, "a pod left the cluster without a preemption record"
        self.rounds += 1

    @precondition(lambda self: any(p.consumes_node for p in self.snap.pods))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        running = sorted({p.job_id for p in self.snap.pods if p.consumes_node})
        self._drop(data.draw(st.sampled_from(running)))

    @precondition(lambda self: any(p.is_pending for p in self.snap.pods))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        pending = sorted({p.job_id for p in self.snap.pods if p.is_pending})
        self._drop(data.draw(st.sampled_from(pending)))

    @rule(index=st.integers(0, 5))
    def node_down(self, index: int) -> None:
        name = f"n{index}"
        nodes = tuple(
            replace(n, unschedulable=True) if n.name == name else n for n in self.snap.nodes
        )
        self.snap = replace(self.snap, nodes=nodes)
        for job_id in sorted({p.job_id for p in self.snap.pods if p.node == name}):
            self._drop(job_id)  # its pods died with the node

    @rule(index=st.integers(0, 5))
    def node_up(self, index: int) -> None:
        name = f"n{index}"
        nodes = tuple(
            replace(n, unschedulable=False) if n.name == name else n for n in self.snap.nodes
        )
        self.snap = replace(self.snap, nodes=nodes)

    @rule(name=st.sampled_from(QUOTAS), cpu=st.sampled_from([8, 16, 32, 64]))
    def quota_change(self, name: str, cpu: int) -> None:
        quotas = tuple(
            replace(q, max={**q.max, "cpu": cpu * 1000}) if q.name == name else q
            for q in self.snap.quotas
        )
        self.snap = replace(self.snap, quotas=quotas)

    # --- always true -----------------------------------------------------------------------
    @invariant()
    def no_job_is_partly_bound(self) -> None:
        for job in self.snap.jobs:
            bound = sum(1 for k in job.pod_keys if self._pod(k).consumes_node)
            assert bound in (0, len(job.pod_keys)), job.id

    def _pod(self, key: str) -> PodInfo:
        return next(p for p in self.snap.pods if p.key == key)

    def _drop(self, job_id: str) -> None:
        self.snap = replace(
            self.snap,
            pods=tuple(p for p in self.snap.pods if p.job_id != job_id),
            jobs=tuple(j for j in self.snap.jobs if j.id != job_id),
        )


ClusterLife.TestCase.settings = settings(
    max_examples=2000,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_cluster_life = ClusterLife.TestCase
