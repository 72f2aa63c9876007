"""GPU monitoring at scale: card samples of 5,000 nodes x 8 cards every 60 s for a simulated day.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/koordweb_gpu_bench \\
    python -m benchmarks.gpu_usage [--nodes 5000] [--ingested 60] [--hours 24] [--json FILE]
        [--markdown] [--pages-only]

It writes a cluster of `--nodes` nodes with 8 GPUs each: 80% held by running jobs of 1-16 whole
nodes, 10% by single-pod jobs sharing cards (two pods at 50% on every card), 10% free. The first
`--ingested` minutes go through the real path: koordlet reports (NodeMetric rows with node and
pod card usage) written for every node, then `gpu_samples_ingest`; the CPU seconds of this process
per minute of samples are measured for each step (the database server's own CPU is not in them).
The rest of the day is filled by the database itself (INSERT ... SELECT of the last sampled
minute, shifted minute by minute; per-job hour sums likewise), so the table reaches a day's size
without hours of Python (the card sample indexes are dropped for the load and built again after
it). Then it reports the table's rows and size, the cost of downsampling one
hour, and the server time of the efficiency page (24 h window) and of the job page of the largest
job (in-process Django test client, median of 3). `--pages-only` reuses the rows of an earlier run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koordweb.settings.local")

CLUSTER = "gpu-bench"
GI = 1024**3
JOB_NODES = (1, 2, 4, 8, 16)
DAY0 = datetime(2026, 1, 5, tzinfo=UTC)


def setup_django() -> None:
    import django

    django.setup()


def build(nodes: int) -> Any:
    """The cluster rows: nodes, cards, 20 teams, running jobs and their pods."""
    from koordweb.models import Cluster, Device, ElasticQuota, Job, Node, Pod

    Cluster.objects.filter(name=CLUSTER).delete()
    cluster = Cluster.objects.create(name=CLUSTER)
    node_rows = Node.objects.bulk_create(
        [
            Node(cluster=cluster, name=f"n{i:05d}", allocatable={"nvidia.com/gpu": 8})
            for i in range(nodes)
        ],
        batch_size=2000,
    )
    Device.objects.bulk_create(
        [
            Device(
                node=node,
                device_type="gpu",
                vendor="nvidia",
                model="H800",
                minor=m,
                resources={"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory": 80 * GI},
            )
            for node in node_rows
            for m in range(8)
        ],
        batch_size=5000,
    )
    teams = [ElasticQuota.objects.create(cluster=cluster, name=f"team-{t:02d}") for t in range(20)]
    whole = [f'{{"minor":{m},"resources":{{"koordinator.sh/gpu-core":"100"}}}}' for m in range(8)]
    half = [f'{{"minor":{m},"resources":{{"koordinator.sh/gpu-core":"50"}}}}' for m in range(8)]
    whole_json = '{"gpu":[' + ",".join(whole) + "]}"
    half_json = '{"gpu":[' + ",".join(half) + "]}"
    key = "scheduling.koordinator.sh/device-allocated"
    jobs: list[Job] = []
    placements: list[tuple[int, list[Node], str, int]] = []  # job index, nodes, annotation, pods
    busy_end, shared_end = int(nodes * 0.8), int(nodes * 0.9)
    at = 0
    while at < busy_end:
        size = min(JOB_NODES[len(jobs) % len(JOB_NODES)], busy_end - at)
        placements.append((len(jobs), node_rows[at : at + size], whole_json, 1))
        jobs.append(_job(cluster, teams[len(jobs) % 20], f"train-{len(jobs)}", size))
        at += size
    for node in node_rows[busy_end:shared_end]:
        for _ in range(2):
            placements.append((len(jobs), [node], half_json, 1))
            jobs.append(_job(cluster, teams[len(jobs) % 20], f"infer-{len(jobs)}", 1))
    Job.objects.bulk_create(jobs, batch_size=2000)
    pods = [
        Pod(
            cluster=cluster,
            job=jobs[index],
            namespace=jobs[index].namespace,
            name=f"{jobs[index].name}-{i}",
            node=node,
            phase="Running",
            annotations={key: annotation},
            created_at=DAY0,
        )
        for index, chosen, annotation, _ in placements
        for i, node in enumerate(chosen)
    ]
    Pod.objects.bulk_create(pods, batch_size=2000)
    return cluster


def _job(cluster: Any, team: Any, name: str, size: int) -> Any:
    from koordweb.models import Job

    return Job(
        cluster=cluster,
        namespace=team.name,
        name=name,
        quota=team,
        state="Running",
        total_number=size,
        min_available=size,
        submitted_at=DAY0,
        started_at=DAY0,
    )


def reports(cluster: Any, moment: datetime, minute: int) -> None:
    """koordlet's reports for every node at `moment`: busy cards, idle ones, a crashed job."""
    from koordweb.models import NodeMetric

    pods_by_node: dict[int, list[str]] = {}
    for node_id, ns, name in cluster.pods.values_list("node_id", "namespace", "name"):
        pods_by_node.setdefault(node_id, []).append(f"{ns}/{name}")
    rows = []
    for node_id in cluster.nodes.values_list("id", flat=True):
        busy = (node_id * 7 + minute) % 100 if node_id % 5 else 0
        held = pods_by_node.get(node_id, [])
        cards = {
            str(m): {"koordinator.sh/gpu-core": busy, "koordinator.sh/gpu-memory": 40 * GI}
            for m in range(8)
        }
        per_pod = {
            pod: {str(m): {"koordinator.sh/gpu-core": busy // len(held)} for m in range(8)}
            for pod in held
        }
        rows.append(
            NodeMetric(node_id=node_id, reported_at=moment, gpu_usage=cards, pod_gpu_usage=per_pod)
        )
    NodeMetric.objects.bulk_create(rows, batch_size=2000)


def ingest(cluster: Any, minutes: int) -> dict[str, Any]:
    from koordweb.services.gpu_usage import gpu_samples_ingest

    report_cpu, ingest_cpu, ingest_wall = [], [], []
    samples = 0
    for minute in range(minutes):
        start = DAY0 + timedelta(minutes=minute)
        t0 = time.process_time()
        reports(cluster, start + timedelta(seconds=55), minute)
        report_cpu.append(time.process_time() - t0)
        t0, w0 = time.process_time(), time.perf_counter()
        counts = gpu_samples_ingest(
            cluster=cluster, now=start + timedelta(seconds=60), period_start=int(start.timestamp())
        )
        ingest_cpu.append(time.process_time() - t0)
        ingest_wall.append(time.perf_counter() - w0)
        samples += counts["samples"]
    return {
        "minutes": minutes,
        "rows_per_minute": samples // max(minutes, 1),
        "report_write_cpu_s_per_minute": round(statistics.mean(report_cpu), 3),
        "ingest_cpu_s_per_minute": round(statistics.mean(ingest_cpu), 3),
        "ingest_wall_s_per_minute": round(statistics.mean(ingest_wall), 3),
    }


def fill(cluster: Any, template_minute: int, first_minute: int, minutes: int) -> float:
    """Copy minute `template_minute` forward, in the database, over [first_minute, minutes), and
    the per-job hour sums of the hours after the ingested ones; returns seconds. The card sample
    indexes are dropped during the load and built again after it (as a bulk load would)."""
    from django.db import connection, transaction

    from koordweb.models import CardSample

    template = int((DAY0 + timedelta(minutes=template_minute)).timestamp())
    t0 = time.perf_counter()
    columns = "node_id, minor, job_id, quota_id, allocated, used, idle_allocated, memory_mib"
    indexes = CardSample._meta.indexes
    with connection.schema_editor() as editor:
        for index in indexes:
            editor.remove_index(CardSample, index)
    for chunk in range(first_minute, minutes, 60):
        upto = min(chunk + 60, minutes)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"""WITH RECURSIVE g(n) AS (SELECT %s UNION ALL SELECT n + 1 FROM g WHERE n < %s)
                INSERT INTO koordweb_cardsample (period_start, period_seconds, {columns})
                SELECT s.period_start + 60 * (g.n - %s), 60, {columns}
                FROM koordweb_cardsample s CROSS JOIN g WHERE s.period_start = %s""",
                [chunk, upto - 1, template_minute, template],
            )
        print(f"filled minutes up to {upto}", flush=True)
    t1 = time.perf_counter()
    with connection.schema_editor() as editor:
        for index in indexes:
            editor.add_index(CardSample, index)
    print(f"indexes built in {time.perf_counter() - t1:.0f} s", flush=True)
    day0 = int(DAY0.timestamp())
    hours = range(day0 + 3600 * -(-(template_minute + 1) // 60), day0 + 60 * minutes, 3600)
    with transaction.atomic(), connection.cursor() as cursor:
        for hour in hours:
            cursor.execute(
                """INSERT INTO koordweb_jobusagehour (job_id, quota_id, hour, allocated, used,
                idle_allocated)
                SELECT job_id, quota_id, %s, 60 * SUM(allocated), 60 * SUM(used),
                60 * SUM(idle_allocated) FROM koordweb_cardsample
                WHERE period_start = %s AND job_id IS NOT NULL GROUP BY job_id, quota_id""",
                [hour, template],
            )
    return time.perf_counter() - t0


def table_size() -> dict[str, Any]:
    from django.db import connection

    from koordweb.models import CardSample, JobUsageHour

    out: dict[str, Any] = {
        "card_sample_rows": CardSample.objects.count(),
        "job_hour_rows": JobUsageHour.objects.count(),
    }
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE koordweb_cardsample")
            cursor.execute(
                "SELECT pg_relation_size('koordweb_cardsample'),"
                " pg_indexes_size('koordweb_cardsample')"
            )
            heap, indexes = cursor.fetchone()
        else:
            cursor.execute("PRAGMA page_size")
            page = cursor.fetchone()[0]
            cursor.execute("PRAGMA page_count")
            heap, indexes = cursor.fetchone()[0] * page, 0
    out["table_mib"] = round(heap / 2**20)
    out["indexes_mib"] = round(indexes / 2**20)
    out["bytes_per_row"] = round((heap + indexes) / max(out["card_sample_rows"], 1), 1)
    return out


def downsample_hour(minutes: int) -> dict[str, Any]:
    """Downsample the day's first hour (as if the raw window had just passed it)."""
    from django.test import override_settings

    from koordweb.services.gpu_history import gpu_history_compact

    now = DAY0 + timedelta(minutes=minutes)  # the raw window ends one hour after the first
    hours = max(1, (minutes // 60) - 1)
    t0, w0 = time.process_time(), time.perf_counter()
    with override_settings(KOORDWEB_GPU_RAW_HOURS=hours, KOORDWEB_GPU_HISTORY_DAYS=3650):
        counts = gpu_history_compact(now=now)
    return {
        "rows_merged": counts["raw_merged"],
        "rows_created": counts["rollup_created"],
        "cpu_s": round(time.process_time() - t0, 2),
        "wall_s": round(time.perf_counter() - w0, 2),
    }


def page_times() -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings

    from koordweb.models import Cluster

    cluster = Cluster.objects.get(name=CLUSTER)
    user, _ = get_user_model().objects.get_or_create(
        username="gpu-bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    biggest = max(cluster.jobs.all(), key=lambda j: j.total_number)
    out: dict[str, Any] = {"job_cards": biggest.total_number * 8}
    with override_settings(ALLOWED_HOSTS=["testserver"], SECURE_SSL_REDIRECT=False):
        client = Client()
        client.force_login(user)
        now = (DAY0 + timedelta(days=1)).isoformat()
        for name, url in (
            ("efficiency_page_s", f"/efficiency/?cluster={CLUSTER}&window=24h&until={now}"),
            ("job_page_s", f"/jobs/{biggest.id}/?cluster={CLUSTER}"),
        ):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - t0)
                assert response.status_code == 200, (url, response.status_code)
            out[name] = round(statistics.median(times), 3)
    return out


def markdown(report: dict[str, Any]) -> str:
    i, s, d, p = report["ingest"], report["size"], report["downsample"], report["pages"]
    return (
        "\n".join(
            [
                "| measure | value |",
                "|---|---:|",
                f"| cards ({report['nodes']:,} nodes x 8) | {report['nodes'] * 8:,} |",
                f"| rows per minute of samples | {i['rows_per_minute']:,} |",
                f"| ingest: CPU s per minute of samples (this process) |"
                f" {i['ingest_cpu_s_per_minute']} |",
                f"| ingest: wall s per minute of samples | {i['ingest_wall_s_per_minute']} |",
                f"| koordlet reports written: CPU s per minute |"
                f" {i['report_write_cpu_s_per_minute']} |",
                f"| card sample rows after {report['minutes'] // 60} h |"
                f" {s['card_sample_rows']:,} |",
                f"| table / indexes (MiB) | {s['table_mib']:,} / {s['indexes_mib']:,} |",
                f"| bytes per row, indexes included | {s['bytes_per_row']} |",
                f"| per-job hour rows | {s['job_hour_rows']:,} |",
                f"| downsampling one hour: rows in / out |"
                f" {d['rows_merged']:,} / {d['rows_created']:,} |",
                f"| downsampling one hour: CPU s / wall s | {d['cpu_s']} / {d['wall_s']} |",
                f"| efficiency page, 24 h window (server s) | {p['efficiency_page_s']} |",
                f"| job page, {p['job_cards']} cards over the day (server s) | {p['job_page_s']} |",
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--ingested", type=int, default=60, help="minutes through the service")
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--pages-only", action="store_true")
    parser.add_argument(
        "--resume", help="the ingest figures (JSON) of a run whose fill was interrupted"
    )
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    setup_django()
    minutes = args.hours * 60
    if args.ingested % 60 or args.ingested > minutes:
        parser.error("--ingested must be whole hours within --hours")
    report: dict[str, Any] = {"nodes": args.nodes, "minutes": minutes}
    from django.db import connection

    report["database"] = connection.vendor
    if args.pages_only:
        report["pages"] = page_times()
        print(json.dumps(report, indent=2))
        return 0
    if args.resume:
        # An interrupted run: its ingest figures, and the minutes it had filled already.
        from django.db.models import Max

        from koordweb.models import CardSample, Cluster

        cluster = Cluster.objects.get(name=CLUSTER)
        report["ingest"] = json.loads(args.resume)
        last = CardSample.objects.aggregate(last=Max("period_start"))["last"]
        filled = (last - int(DAY0.timestamp())) // 60 + 1
    else:
        t0 = time.perf_counter()
        cluster = build(args.nodes)
        report["build_s"] = round(time.perf_counter() - t0, 1)
        report["ingest"] = ingest(cluster, args.ingested)
        filled = args.ingested
    print(json.dumps(report["ingest"]), flush=True)
    report["fill_s"] = round(fill(cluster, args.ingested - 1, filled, minutes), 1)
    report["size"] = table_size()
    print(json.dumps(report["size"]), flush=True)
    report["downsample"] = downsample_hour(minutes)
    print(json.dumps(report["downsample"]), flush=True)
    report["pages"] = page_times()
    text = json.dumps(report, indent=2)
    if args.json_path:
        with open(args.json_path, "w") as out:
            out.write(text + "\n")
    print(markdown(report) if args.markdown else text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
