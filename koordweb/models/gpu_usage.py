"""GPU usage history: card samples attributed to the job and team holding each card.

One `CardSample` row per card holder per sample period: a whole card held by one pod is one row,
a card shared by two pods is two rows (each with its share), a free card is one row with no job.
Amounts are additive "card-seconds in hundredths of a card" (a whole card for 60 s is 6,000), so
downsampling is a plain SUM and GPU-hours survive it exactly: GPU-hours = amount / 360,000.
Times are integer epoch seconds: 8 bytes on PostgreSQL, a small integer on SQLite, and cheap to
bucket (`period_start - period_start % 3600`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import models

from koordweb.models.cluster import Node
from koordweb.models.workload import ElasticQuota, Job

# An amount of 360,000 is one GPU-hour (100 hundredths of a card x 3,600 s).
CARD_HOUR = 360_000


def epoch(moment: datetime) -> int:
    """A moment as the epoch seconds the samples are keyed by."""
    return int(moment.timestamp())


def from_epoch(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


class CardSample(models.Model):
    """One card holder over one period (60 s raw, 3,600 s once downsampled)."""

    id = models.BigAutoField(primary_key=True)
    period_start = models.BigIntegerField(help_text="epoch seconds (UTC)")
    period_seconds = models.PositiveIntegerField(default=60)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    minor = models.PositiveSmallIntegerField()
    job = models.ForeignKey(Job, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    quota = models.ForeignKey(
        ElasticQuota, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Hundredths of a card x seconds: held by the job, busy (the busy share used), and held
    # while the holder was idle (busy under KOORDWEB_GPU_IDLE_PERCENT).
    allocated = models.IntegerField(default=0)
    used = models.IntegerField(default=0)
    idle_allocated = models.IntegerField(default=0)
    memory_mib = models.IntegerField(default=0, help_text="GPU memory used, MiB (mean)")

    class Meta:
        indexes = [
            models.Index(fields=["node", "minor", "period_start"], name="cardsample_card_time"),
            models.Index(fields=["job", "period_start"], name="cardsample_job_time"),
            models.Index(fields=["period_seconds", "period_start"], name="cardsample_tier_time"),
        ]


class JobUsageHour(models.Model):
    """A job's card-seconds per hour (the efficiency page reads these, never the samples)."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    quota = models.ForeignKey(
        ElasticQuota, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    hour = models.BigIntegerField(help_text="epoch seconds of the hour's start (UTC)")
    allocated = models.BigIntegerField(default=0)
    used = models.BigIntegerField(default=0)
    idle_allocated = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "hour"], name="uniq_job_usage_hour"),
        ]
        indexes = [
            models.Index(fields=["hour"], name="jobusagehour_hour"),
            models.Index(fields=["quota", "hour"], name="jobusagehour_quota_hour"),
        ]


class JobGpuState(models.Model):
    """Where a job's cards stand now: idle since when, and what the idle streak has cost."""

    job = models.OneToOneField(
        Job, on_delete=models.CASCADE, primary_key=True, related_name="gpu_state"
    )
    idle_since = models.DateTimeField(null=True, blank=True)
    # Card-seconds (hundredths of a card) held while idle since `idle_since`.
    idle_allocated = models.BigIntegerField(default=0)
    last_busy_at = models.DateTimeField(null=True, blank=True)
    last_sample_at = models.DateTimeField(null=True, blank=True)

    @property
    def idle_gpu_hours(self) -> float:
        return self.idle_allocated / CARD_HOUR
