"""Engine invariants over random clusters and jobs (hypothesis).

No resource over-allocated, gangs all or nothing, MustGather honoured, victims strictly lower
priority and never protected, quota runtime never exceeded by admission, same input same output.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import ClusterSnapshot, QuotaInfo, plan_round
from tests.oracle.asserts import PROTECT, check_invariants
from tests.scheduler.builders import CORE, SPINE_BLOCK, cluster, gang, node, pod


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSnapshot:
    c = cluster().topology(SPINE_BLOCK)
    n_nodes = draw(st.integers(2, 9))
    free: dict[str, list[int]] = {}
    for i in range(n_nodes):
        b = (
            node(f"n{i}")
            .cpu(draw(st.sampled_from([4, 8, 16])))
            .gpus(draw(st.sampled_from([0, 2, 4])))
        )
        if draw(st.booleans()) or i % 3:
            b.spine(f"s{i % 2}")
        if draw(st.integers(0, 4)):
            b.block(f"b{i % 4}")
        c.node(b)
        built = c.nodes[-1]
        free[built.name] = [built.allocatable["cpu"], built.allocatable.get("nvidia.com/gpu", 0)]
    quotas = draw(st.booleans())
    if quotas:
        c.quota(QuotaInfo("qa", {"cpu": 8000}, {"cpu": 16000}))
        c.quota(QuotaInfo("qb", {"cpu": 4000}, {"cpu": 64000}))
    for j in range(draw(st.integers(0, 8))):
        target = f"n{draw(st.integers(0, n_nodes - 1))}"
        cpu, gpu = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([0, 0, 1]))
        if free[target][0] < cpu * 1000 or free[target][1] < gpu:
            continue
        free[target][0] -= cpu * 1000
        free[target][1] -= gpu
        p = pod(f"run-{j}").cpu(cpu).gpu(gpu).priority(draw(st.integers(0, 3))).on(target)
        p.job(f"batch/run-{j // 2}")  # pairs of pods form one running job
        if draw(st.integers(0, 5)) == 0:
            p.label(PROTECT, "true")
        if quotas:
            p.quota(draw(st.sampled_from(["qa", "qb"])))
        c.running(p)
    for g in range(draw(st.integers(1, 6))):
        job = gang(f"ml/g{g}", pods=draw(st.integers(1, 4))).cpu(
            draw(st.sampled_from([1, 2, 4, 8]))
        )
        job.gpu(draw(st.sampled_from([0, 0, 1]))).priority(draw(st.integers(0, 6)))
        rule = draw(st.sampled_from(["none", "must-block", "must-spine", "prefer"]))
        if rule == "must-block":
            job.must_gather("BlockLayer")
        elif rule == "must-spine":
            job.must_gather("SpineLayer")
        elif rule == "prefer":
            job.prefer_gather("BlockLayer").prefer_gather("SpineLayer")
        if quotas:
            job.quota(draw(st.sampled_from(["qa", "qb"])))
        c.submit(job)
    return c.snapshot()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_round_invariants(snap: ClusterSnapshot) -> None:
    result = plan_round(snap, CORE)
    check_invariants(snap, result)
    again = plan_round(snap, CORE)
    assert json.dumps(result.to_dict(), sort_keys=True) == json.dumps(
        again.to_dict(), sort_keys=True
    )
