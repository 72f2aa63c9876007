"""Prometheus families of GPU monitoring, read at scrape time from the last sampled period.

Per card holder (one series per card, one more per extra pod sharing a card): busy percent, the
allocated fraction of the card and GPU memory used, labelled `cluster`, `node`, `minor`, `model`,
`namespace`, `job`, `team` (empty for the free part of a card). Cardinality is bounded by the
cards and the pods sharing them now: a job's series disappear with the job (a collector, not
stored gauges). KOORDWEB_GPU_METRICS_PER_CARD=false keeps only the per-team families for sites
that already scrape DCGM per card. Per team: jobs flagged idle now.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from koordweb.models import CardSample, Cluster, Device, Job
from koordweb.selectors.gpu_usage import flagged_idle_jobs

LABELS = ["cluster", "node", "minor", "model", "namespace", "job", "team"]
MIB = 1024**2


class GpuCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        busy = GaugeMetricFamily(
            "koordweb_gpu_busy_percent",
            "Percent of a card's cores busy, per holder, in the last sampled period",
            labels=LABELS,
        )
        allocated = GaugeMetricFamily(
            "koordweb_gpu_allocated_ratio",
            "Fraction of a card allocated to the holder (1 = a whole card)",
            labels=LABELS,
        )
        memory = GaugeMetricFamily(
            "koordweb_gpu_memory_used_bytes",
            "GPU memory used by the holder in the last sampled period",
            labels=LABELS,
        )
        idle = GaugeMetricFamily(
            "koordweb_gpu_idle_jobs",
            "Running jobs whose GPUs have been idle longer than their team's threshold",
            labels=["cluster", "team"],
        )
        step = settings.KOORDWEB_GPU_SAMPLE_SECONDS
        for cluster in Cluster.objects.all():
            if getattr(settings, "KOORDWEB_GPU_METRICS_PER_CARD", True):
                self._cards(cluster, step, busy, allocated, memory)
            counts: dict[str, int] = {}
            for job in flagged_idle_jobs(Job.objects.filter(cluster=cluster)):
                team = job.quota.name if job.quota else ""
                counts[team] = counts.get(team, 0) + 1
            for team, count in sorted(counts.items()):
                idle.add_metric([cluster.name, team], count)
        yield busy
        yield allocated
        yield memory
        yield idle

    def _cards(
        self,
        cluster: Cluster,
        step: int,
        busy: GaugeMetricFamily,
        allocated: GaugeMetricFamily,
        memory: GaugeMetricFamily,
    ) -> None:
        models = {
            (node, minor): model
            for node, minor, model in Device.objects.filter(
                node__cluster=cluster, device_type=Device.Type.GPU
            ).values_list("node_id", "minor", "model")
        }
        rows = CardSample.objects.filter(
            node__cluster=cluster,
            period_start=cluster.gpu_sampled_until - step,
            period_seconds=step,
        ).values_list(
            "node_id",
            "node__name",
            "minor",
            "job__namespace",
            "job__name",
            "quota__name",
            "allocated",
            "used",
            "memory_mib",
        )
        for node_id, node, minor, namespace, job, team, held, used, mib in rows:
            labels = [
                cluster.name,
                node,
                str(minor),
                models.get((node_id, minor), ""),
                namespace or "",
                job or "",
                team or "",
            ]
            busy.add_metric(labels, used / step)
            allocated.add_metric(labels, held / step / 100)
            memory.add_metric(labels, mib * MIB)
