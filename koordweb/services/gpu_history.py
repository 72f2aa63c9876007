"""GPU usage history upkeep: raw card samples downsampled, then pruned (the beat task
`gpu_history_compact`).

Raw rows (KOORDWEB_GPU_SAMPLE_SECONDS each) older than KOORDWEB_GPU_RAW_HOURS are summed into one
row per card holder and KOORDWEB_GPU_ROLLUP_SECONDS bucket; the amounts are additive card-seconds,
so GPU-hours before and after are equal. Rows and per-job hour sums older than
KOORDWEB_GPU_HISTORY_DAYS are deleted, and NodeMetric reports older than an hour (a node's latest
always stays: the load-aware filter reads it).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Min, Sum

from koordweb.models import CardSample, JobUsageHour, NodeMetric, latest_node_metric_ids
from koordweb.models.gpu_usage import epoch

NODE_METRIC_KEEP = timedelta(hours=1)


def gpu_history_compact(*, now: datetime) -> dict[str, int]:
    """Downsample what left the raw window, then prune; returns row counts."""
    rollup = settings.KOORDWEB_GPU_ROLLUP_SECONDS
    cutoff = epoch(now) - settings.KOORDWEB_GPU_RAW_HOURS * 3600
    cutoff -= cutoff % rollup  # whole buckets only
    raw = CardSample.objects.filter(period_seconds__lt=rollup, period_start__lt=cutoff)
    first = raw.aggregate(first=Min("period_start"))["first"]
    merged = created = 0
    if first is not None:
        for bucket in range(first - first % rollup, cutoff, rollup):
            with transaction.atomic():
                counts = _bucket_compact(bucket, rollup)
            merged += counts[0]
            created += counts[1]
    oldest = epoch(now) - settings.KOORDWEB_GPU_HISTORY_DAYS * 86400
    pruned, _ = CardSample.objects.filter(period_start__lt=oldest).delete()
    hours_pruned, _ = JobUsageHour.objects.filter(hour__lt=oldest - oldest % 3600).delete()
    latest = latest_node_metric_ids()
    reports, _ = (
        NodeMetric.objects.filter(reported_at__lt=now - NODE_METRIC_KEEP)
        .exclude(id__in=latest)
        .delete()
    )
    return {
        "raw_merged": merged,
        "rollup_created": created,
        "pruned": pruned + hours_pruned,
        "node_metrics_pruned": reports,
    }


def _bucket_compact(bucket: int, rollup: int) -> tuple[int, int]:
    raw = CardSample.objects.filter(
        period_seconds__lt=rollup, period_start__gte=bucket, period_start__lt=bucket + rollup
    )
    grouped = (
        raw.values("node_id", "minor", "job_id", "quota_id")
        .annotate(
            a=Sum("allocated"),
            u=Sum("used"),
            i=Sum("idle_allocated"),
            m=Avg("memory_mib"),
        )
        .order_by()
    )
    rows = [
        CardSample(
            period_start=bucket,
            period_seconds=rollup,
            node_id=g["node_id"],
            minor=g["minor"],
            job_id=g["job_id"],
            quota_id=g["quota_id"],
            allocated=g["a"] or 0,
            used=g["u"] or 0,
            idle_allocated=g["i"] or 0,
            memory_mib=int(g["m"] or 0),
        )
        for g in grouped
    ]
    merged, _ = raw.delete()
    CardSample.objects.bulk_create(rows, batch_size=5000)
    return merged, len(rows)
