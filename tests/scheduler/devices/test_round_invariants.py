"""Device invariants over random GPU clusters with whole and shared cards (hypothesis).

With the full profile (per-card allocation, exact card checks in the victim search): no card is
ever given more than it has, victims are strictly lower priority, and the same input gives the
same output.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import ClusterSnapshot, Profile, plan_round
from scheduler.devices import AllocatedDevice, parse_device_allocated, render_device_allocated
from scheduler.devices.names import ANNOTATION_DEVICE_ALLOCATED
from tests.scheduler.builders import cluster, gang, pod
from tests.scheduler.devices.builders import GiB, gpu_node

HALF = 50
PROFILE = Profile.default()


def holding(name: str, node: str, cards: dict[int, int], priority: int) -> object:
    """A running pod holding `cards` (minor -> core percent), annotated as Koordinator writes."""
    held = [
        AllocatedDevice("gpu", m, core, 80 * GiB * core // 100, core) for m, core in cards.items()
    ]
    built = pod(name).priority(priority).on(node)
    if all(core == 100 for core in cards.values()):
        built.gpu(len(cards))
    else:
        built.request("koordinator.sh/gpu-core", HALF)
        built.request("koordinator.sh/gpu-memory-ratio", HALF)
    return replace(
        built.build(), annotations={ANNOTATION_DEVICE_ALLOCATED: render_device_allocated(held)}
    )


@st.composite
def gpu_clusters(draw: st.DrawFn) -> ClusterSnapshot:
    c = cluster()
    names = [f"gpu-{i}" for i in range(draw(st.integers(1, 4)))]
    c.nodes.extend(gpu_node(n) for n in names)
    k = 0
    for n in names:
        used = [0] * 8  # core percent per card
        for _ in range(draw(st.integers(0, 6))):
            whole = draw(st.sampled_from([0, 1, 2]))  # 0: half a card
            if whole:
                free = [m for m in range(8) if used[m] == 0][:whole]
                if len(free) < whole:
                    continue
                cards = {m: 100 for m in free}
            else:
                free = [m for m in range(8) if used[m] <= 100 - HALF][:1]
                if not free:
                    continue
                cards = {free[0]: HALF}
            for m, core in cards.items():
                used[m] += core
            c.pods.append(holding(f"run-{k}", n, cards, draw(st.integers(0, 3))))
            k += 1
    for g in range(draw(st.integers(1, 4))):
        job = gang(f"ml/g{g}", pods=draw(st.integers(1, 3))).priority(draw(st.integers(0, 6)))
        whole = draw(st.sampled_from([0, 1, 2, 4]))
        if whole:
            job.gpu(whole)
        else:
            job.request("koordinator.sh/gpu-core", HALF)
            job.request("koordinator.sh/gpu-memory-ratio", HALF)
        c.submit(job)
    return c.snapshot()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu_clusters())
def test_cards_never_overcommitted_and_victims_lower(snap: ClusterSnapshot) -> None:
    result = plan_round(snap, PROFILE)
    pods = {p.key: p for p in snap.pods}
    core: dict[tuple[str, int], int] = defaultdict(int)
    for p in snap.pods:
        if p.node:
            for d in parse_device_allocated(p.annotations[ANNOTATION_DEVICE_ALLOCATED]):
                core[(p.node, d.minor)] += d.core
    for key, placed in result.placements.items():
        assert placed.annotations, key  # every GPU pod placed on a Device node gets cards
        for d in parse_device_allocated(placed.annotations[ANNOTATION_DEVICE_ALLOCATED]):
            core[(placed.node, d.minor)] += d.core
    assert all(used <= 100 for used in core.values()), core
    for record in result.preemptions:
        preemptor = max(pods[k].priority for k in record.nominations)
        assert all(pods[v].priority < preemptor for v in record.victim_pods)
        assert record.victim_pods and set(record.nominations) <= set(pods)
    again = plan_round(snap, PROFILE)
    assert json.dumps(result.to_dict(), sort_keys=True) == json.dumps(
        again.to_dict(), sort_keys=True
    )
