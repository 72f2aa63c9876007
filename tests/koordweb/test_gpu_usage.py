"""GPU monitoring: NodeMetric card reports attributed to the jobs and teams holding the cards,
kept through downsampling, and the idle streak that flags a job."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db.models import Sum

from koordweb.models import CARD_HOUR, CardSample, JobGpuState, JobUsageHour, NodeMetric
from koordweb.services.gpu_history import gpu_history_compact
from koordweb.services.gpu_usage import gpu_samples_ingest
from tests import builders as f

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
GI = 1024**3


@pytest.fixture
def card_node() -> Any:
    node = f.NodeFactory(name="gpu-1")
    for minor in range(2):
        f.DeviceFactory(node=node, minor=minor)
    return node


def ingest_minute(cluster: Any, minute: int) -> dict[str, int]:
    start = int(T0.timestamp()) + 60 * minute
    return gpu_samples_ingest(
        cluster=cluster, now=T0 + timedelta(minutes=minute + 1), period_start=start
    )


def test_two_pods_sharing_one_card_each_get_their_share_and_their_own_use(card_node: Any) -> None:
    vision = f.QuotaFactory(cluster=card_node.cluster, name="vision")
    speech = f.QuotaFactory(cluster=card_node.cluster, name="speech")
    busy = f.card_holder(vision, card_node, {0: 50}, "busy")
    idle = f.card_holder(speech, card_node, {0: 30}, "idle")
    f.card_report(
        card_node,
        T0 + timedelta(seconds=50),
        {0: 40, 1: 0},
        {"vision/busy-0": {0: 40}, "speech/idle-0": {0: 0}},
    )

    ingest_minute(card_node.cluster, 0)

    rows = {(r.minor, r.job_id): r for r in CardSample.objects.all()}
    assert rows[(0, busy.id)].allocated == 50 * 60 and rows[(0, busy.id)].used == 40 * 60
    assert rows[(0, busy.id)].quota_id == vision.id and rows[(0, busy.id)].idle_allocated == 0
    assert rows[(0, idle.id)].allocated == 30 * 60 and rows[(0, idle.id)].used == 0
    assert rows[(0, idle.id)].idle_allocated == 30 * 60
    # The free fifth of card 0 and the whole free card 1 are rows with no job.
    assert rows[(0, None)].allocated == 0 and rows[(1, None)].allocated == 0
    hours = {h.job_id: h for h in JobUsageHour.objects.all()}
    assert hours[idle.id].idle_allocated == 30 * 60 and hours[busy.id].used == 40 * 60


def test_shared_card_without_pod_reports_is_split_by_share(card_node: Any) -> None:
    quota = f.QuotaFactory(cluster=card_node.cluster, name="team")
    big = f.card_holder(quota, card_node, {1: 75}, "big")
    small = f.card_holder(quota, card_node, {1: 25}, "small")
    f.card_report(card_node, T0 + timedelta(seconds=30), {0: 0, 1: 80}, {})

    ingest_minute(card_node.cluster, 0)

    used = dict(CardSample.objects.filter(minor=1).values_list("job_id", "used"))
    assert used[big.id] == 60 * 60 and used[small.id] == 20 * 60
    assert None not in used  # a card held whole has no free row


def test_a_job_that_moved_between_rounds_is_charged_on_each_card_in_its_time(
    card_node: Any,
) -> None:
    other = f.NodeFactory(cluster=card_node.cluster, name="gpu-2")
    f.DeviceFactory(node=other, minor=0)
    quota = f.QuotaFactory(cluster=card_node.cluster, name="team")
    job = f.card_holder(quota, card_node, {1: 100}, "mover")
    f.card_report(card_node, T0 + timedelta(seconds=30), {0: 0, 1: 90}, {"team/mover-0": {1: 90}})
    ingest_minute(card_node.cluster, 0)

    # Preempted and placed again elsewhere: the pod is now on gpu-2, card 0.
    job.pods.update(node=other, annotations=f.card_allocation({0: 100}))
    f.card_report(card_node, T0 + timedelta(seconds=90), {0: 0, 1: 0}, {})
    f.card_report(other, T0 + timedelta(seconds=90), {0: 70}, {"team/mover-0": {0: 70}})
    ingest_minute(card_node.cluster, 1)

    mine = CardSample.objects.filter(job=job).order_by("period_start")
    assert [(r.node_id, r.minor, r.used) for r in mine] == [
        (card_node.id, 1, 90 * 60),
        (other.id, 0, 70 * 60),
    ]
    # Card 1 of gpu-1 is free in the second minute: nobody is charged for it.
    assert (
        CardSample.objects.get(
            node=card_node, minor=1, period_start__gt=mine[0].period_start
        ).job_id
        is None
    )
    hour = JobUsageHour.objects.get(job=job)
    assert hour.allocated == 2 * 100 * 60 and hour.used == (90 + 70) * 60


def test_a_period_is_sampled_once(card_node: Any) -> None:
    f.card_report(card_node, T0 + timedelta(seconds=30), {0: 10, 1: 0}, {})
    assert ingest_minute(card_node.cluster, 0)["samples"] == 2
    assert ingest_minute(card_node.cluster, 0)["samples"] == 0
    assert CardSample.objects.count() == 2


def test_idle_streak_starts_at_the_first_idle_period_and_a_busy_one_ends_it(
    card_node: Any,
) -> None:
    quota = f.QuotaFactory(cluster=card_node.cluster, name="team")
    job = f.card_holder(quota, card_node, {0: 100}, "nb")
    for minute, busy in enumerate([50, 0, 0, 0]):
        f.card_report(card_node, T0 + timedelta(minutes=minute, seconds=30), {0: busy, 1: 0}, {})
        ingest_minute(card_node.cluster, minute)
    state = JobGpuState.objects.get(job=job)
    assert state.idle_since == T0 + timedelta(minutes=1)
    assert state.idle_allocated == 3 * 100 * 60  # three idle minutes of a whole card
    f.card_report(card_node, T0 + timedelta(minutes=4, seconds=30), {0: 60, 1: 0}, {})
    ingest_minute(card_node.cluster, 4)
    state.refresh_from_db()
    assert state.idle_since is None and state.idle_allocated == 0


def test_downsampling_keeps_gpu_hours_within_one_percent(card_node: Any, settings: Any) -> None:
    settings.KOORDWEB_GPU_RAW_HOURS = 1
    quota = f.QuotaFactory(cluster=card_node.cluster, name="team")
    job = f.card_holder(quota, card_node, {0: 100, 1: 40}, "long")
    for minute in range(150):
        busy = (minute * 37) % 101
        f.card_report(
            card_node, T0 + timedelta(minutes=minute, seconds=20), {0: busy, 1: busy // 3}, {}
        )
        ingest_minute(card_node.cluster, minute)

    def totals() -> dict[str, int]:
        return CardSample.objects.filter(job=job).aggregate(
            a=Sum("allocated"), u=Sum("used"), i=Sum("idle_allocated")
        )

    before = totals()
    raw_rows = CardSample.objects.count()
    counts = gpu_history_compact(now=T0 + timedelta(minutes=150))
    after = totals()

    assert counts["rollup_created"] > 0
    # 08:00-09:00 left the one-hour raw window at 10:30: its 180 rows became one row per holder
    # (card 0, the job's 40% of card 1 and its free 60%); 09:00-10:30 stays raw.
    assert CardSample.objects.filter(period_seconds=3600).count() == 3
    assert CardSample.objects.count() == raw_rows - 180 + 3
    for key in ("a", "u", "i"):
        assert abs(after[key] - before[key]) <= 0.01 * before[key]
    assert before["a"] / CARD_HOUR == pytest.approx(150 / 60 * 1.4)
    # Recent raw rows (inside the window) are left as they are.
    assert CardSample.objects.filter(period_seconds=60).exists()


def test_history_older_than_its_days_is_pruned(card_node: Any, settings: Any) -> None:
    settings.KOORDWEB_GPU_HISTORY_DAYS = 1
    f.card_report(card_node, T0 + timedelta(seconds=30), {0: 10, 1: 0}, {})
    ingest_minute(card_node.cluster, 0)
    gpu_history_compact(now=T0 + timedelta(days=3))
    assert not CardSample.objects.exists()
    # The node's latest report stays: the load-aware filter reads it.
    assert NodeMetric.objects.filter(node=card_node).count() == 1


def test_vnpu_and_smlu_slices_are_charged_by_their_share_of_the_card(card_node: Any) -> None:
    quota = f.QuotaFactory(cluster=card_node.cluster, name="team")
    # What the allocator writes for an Ascend vNPU (vir10 of a 20-core card) and an sMLU slice.
    vnpu = {"koordinator.sh/gpu-core": "50", "huawei.com/npu-core": "10", "huawei.com/npu-cpu": "4"}
    smlu = {"koordinator.sh/gpu-core": "25", "koordinator.sh/gpu-memory": str(8 * GI)}
    jobs = {}
    for name, resources in (("vnpu", vnpu), ("smlu", smlu)):
        annotation = {"gpu": [{"minor": 0, "resources": resources}]}
        job = f.gang(
            card_node.cluster,
            name,
            quota=quota,
            namespace="team",
            nodes=[card_node],
            requests={"cpu": 4000, "nvidia.com/gpu": 1},
            annotations={f.DEVICE_ALLOCATED: json.dumps(annotation)},
        )
        jobs[name] = job
    f.card_report(card_node, T0 + timedelta(seconds=30), {0: 60, 1: 0}, {})

    ingest_minute(card_node.cluster, 0)

    rows = {r.job_id: r for r in CardSample.objects.filter(minor=0)}
    assert rows[jobs["vnpu"].id].allocated == 50 * 60 and rows[jobs["smlu"].id].allocated == 25 * 60
    # 60% busy over 75% held: two thirds to the vNPU, one third to the slice; a quarter is free.
    assert rows[jobs["vnpu"].id].used == 40 * 60 and rows[jobs["smlu"].id].used == 20 * 60
    assert rows[None].allocated == 0 and rows[None].used == 0
