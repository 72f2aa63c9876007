"""End-to-end round scale: rounds through a real Celery worker and the configured database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/koordweb_bench \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
    python -m benchmarks.e2e_scale [--nodes 1000,5000] [--rounds 2] [--json FILE] [--cprofile]

For each size it writes a simulated cluster as rows (bulk_create): nodes of 8 GPUs under
Spine (8 blocks) > Block (16 nodes) > Node, half of them busy with one running 8-GPU pod each, and
pending gangs of 1-16 pods x 4 GPUs (a third MustGather Block, a third PreferGather Spine, the
rest without a rule) that together fill the idle half. It then asks a worker subprocess
(`celery -A koordweb worker --pool solo`, on a queue of its own so no other worker takes the task)
for `koordweb.tasks.run_round` rounds one after another and reads each Round row: `engine_ms`
(in the engine) beside `sync_snapshot_ms` and `record_enact_ms` (database and enact), the
worker's `duration_ms` and the wall time seen from here (queueing included). Pods/s end to end =
pods bound / wall time. `--cprofile` reruns the first round of each size in this process under
cProfile and keeps the heaviest functions of the database path. The cluster rows are deleted
at the end (`--keep` keeps them).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.round_scale import node_counts

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koordweb.settings")

SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
GI = 1024**3
NODES_PER_BLOCK = 16
BLOCKS_PER_SPINE = 8
GANG_SIZES = (1, 2, 4, 8, 16)
RULES: tuple[dict[str, Any], ...] = (
    {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]},
    {"gatherStrategy": [{"layer": "SpineLayer", "strategy": "PreferGather"}]},
    {},
)
NODE_ALLOC = {"cpu": 128_000, "memory": 1024 * GI, "nvidia.com/gpu": 8, "pods": 110}


def setup_django() -> None:
    import django

    django.setup()


def unapplied_migrations() -> int:
    """How many migrations the configured database still lacks."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def gpu_requests(gpus: int) -> dict[str, int]:
    return {"cpu": gpus * 12_000, "memory": gpus * 96 * GI, "nvidia.com/gpu": gpus}


def build_cluster(name: str, nodes: int, pending_pods: int, seed: int = 7) -> Any:
    """The cluster as rows: layers, nodes, busy half, pending gangs. Returns the Cluster."""
    from django.db import transaction
    from django.utils import timezone

    from koordweb.models import Cluster, Job, JobState, Node, Pod, PodPhase, TopologyLayer

    rng = random.Random(seed)
    now = timezone.now()
    Cluster.objects.filter(name=name).delete()
    with transaction.atomic():
        cluster = Cluster.objects.create(name=name, backend=Cluster.Backend.SIMULATED)
        TopologyLayer.objects.bulk_create(
            [
                TopologyLayer(cluster=cluster, name="SpineLayer", label_keys=[SPINE], position=0),
                TopologyLayer(
                    cluster=cluster,
                    name="BlockLayer",
                    parent_name="SpineLayer",
                    label_keys=[BLOCK],
                    position=1,
                ),
                TopologyLayer(
                    cluster=cluster, name="NodeTopologyLayer", parent_name="BlockLayer", position=2
                ),
            ]
        )
        rows = []
        for i in range(nodes):
            block = i // NODES_PER_BLOCK
            labels = {SPINE: f"spine-{block // BLOCKS_PER_SPINE}", BLOCK: f"block-{block}"}
            rows.append(
                Node(
                    cluster=cluster,
                    name=f"node-{i:05d}",
                    labels=labels,
                    allocatable=dict(NODE_ALLOC),
                    capacity=dict(NODE_ALLOC),
                )
            )
        node_rows = Node.objects.bulk_create(rows, batch_size=1000)
        busy = rng.sample(node_rows, nodes // 2)
        jobs: list[Job] = []
        pods: list[tuple[int, Pod]] = []
        for k, node in enumerate(busy):
            jobs.append(
                Job(
                    cluster=cluster,
                    namespace="batch",
                    name=f"busy-{k}",
                    priority=10,
                    min_available=1,
                    total_number=1,
                    state=JobState.RUNNING,
                    submitted_at=now - timedelta(hours=1),
                    started_at=now - timedelta(hours=1),
                )
            )
            pods.append(
                (
                    len(jobs) - 1,
                    Pod(
                        cluster=cluster,
                        namespace="batch",
                        name=f"busy-{k}-0",
                        requests=gpu_requests(8),
                        limits=gpu_requests(8),
                        priority=10,
                        node=node,
                        phase=PodPhase.RUNNING,
                        created_at=now,
                        bound_at=now,
                        started_at=now,
                    ),
                )
            )
        placed = 0
        g = 0
        while placed < pending_pods:
            size = min(rng.choice(GANG_SIZES), pending_pods - placed)
            rule = RULES[g % 3]
            jobs.append(
                Job(
                    cluster=cluster,
                    namespace="train",
                    name=f"gang-{g:05d}",
                    priority=500,
                    min_available=size,
                    total_number=size,
                    topology_spec=rule,
                    submitted_at=now + timedelta(microseconds=g),
                    state=JobState.PENDING,
                )
            )
            for p in range(size):
                pods.append(
                    (
                        len(jobs) - 1,
                        Pod(
                            cluster=cluster,
                            namespace="train",
                            name=f"gang-{g:05d}-{p}",
                            requests=gpu_requests(4),
                            limits=gpu_requests(4),
                            priority=500,
                            topology_index=p if rule else None,
                            created_at=now,
                        ),
                    )
                )
            placed += size
            g += 1
        saved = Job.objects.bulk_create(jobs, batch_size=1000)
        for job_index, pod in pods:
            pod.job = saved[job_index]
        Pod.objects.bulk_create([p for _j, p in pods], batch_size=1000)
    return cluster


class SubprocessWorker:
    """`celery -A koordweb worker` on a private queue, started and stopped by this process."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "koordweb",
            "worker",
            "--pool",
            "solo",
            "--concurrency",
            "1",
            "-Q",
            queue,
            "-n",
            f"{queue}@%h",
            "-l",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def send_round(queue: str) -> Callable[[int], None]:
    from koordweb.tasks import run_round

    def send(cluster_id: int) -> None:
        run_round.apply_async(args=[cluster_id, "manual"], queue=queue)

    return send


def wait_round(cluster: Any, after_id: int, timeout: float) -> Any:
    """The first finished Round of `cluster` with an id above `after_id`."""
    from koordweb.models import Round

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = (
            Round.objects.filter(cluster=cluster, id__gt=after_id)
            .exclude(state=Round.State.RUNNING)
            .order_by("id")
            .first()
        )
        if found is not None:
            return found
        time.sleep(0.02)
    raise TimeoutError(f"no round of cluster {cluster.name} finished within {timeout:.0f}s")


def run_rounds(
    cluster: Any, rounds: int, send: Callable[[int], None], timeout: float
) -> list[dict[str, Any]]:
    from koordweb.models import Round

    out = []
    last = Round.objects.filter(cluster=cluster).order_by("-id").values_list("id", flat=True)
    after = last.first() or 0
    for _ in range(rounds):
        started = time.perf_counter()
        send(cluster.id)
        rnd = wait_round(cluster, after, timeout)
        wall = time.perf_counter() - started
        after = rnd.id
        metrics = rnd.metrics or {}
        out.append(
            {
                "state": rnd.state,
                "error": rnd.error[:300] if rnd.error else "",
                "pods_bound": rnd.pods_bound,
                "jobs_placed": rnd.jobs_placed,
                "engine_ms": rnd.engine_ms,
                "duration_ms": rnd.duration_ms,
                "sync_snapshot_ms": metrics.get("sync_snapshot_ms"),
                "record_enact_ms": metrics.get("record_enact_ms"),
                "wall_ms": int(wall * 1000),
            }
        )
    return out


def profile_first_round(cluster: Any, top: int = 12) -> dict[str, Any]:
    """One round in this process under cProfile, with every SQL statement timed.

    Returns the koordweb/scheduler functions heaviest by cumulative time, and the SQL statements
    (first 160 characters, so one statement shape with different ids counts together) heaviest
    by total time: together they say where the database path spends a round.
    """
    from django.db import connection

    from koordweb.tasks import run_round

    statements: dict[str, list[float]] = {}

    def timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            shape = " ".join(sql.split())[:160]
            statements.setdefault(shape, []).append(time.perf_counter() - started)

    profiler = cProfile.Profile()
    with connection.execute_wrapper(timed):
        profiler.enable()
        run_round(cluster.id, "manual")
        profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    root = str(Path(__file__).resolve().parent.parent) + "/"
    functions: list[dict[str, Any]] = []
    for (filename, line, func), (_cc, calls, own, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if "/koordweb/" in filename or "/scheduler/" in filename:
            where = filename.split(root)[-1]
            functions.append(
                {
                    "function": f"{where}:{line}:{func}",
                    "calls": calls,
                    "own_s": round(own, 3),
                    "cumulative_s": round(cumulative, 3),
                }
            )
    functions.sort(key=lambda r: -r["cumulative_s"])
    sql: list[dict[str, Any]] = [
        {"sql": shape, "count": len(times), "total_s": round(sum(times), 3)}
        for shape, times in statements.items()
    ]
    sql.sort(key=lambda r: -r["total_s"])
    return {
        "queries": sum(len(t) for t in statements.values()),
        "query_seconds": round(sum(sum(t) for t in statements.values()), 3),
        "functions": functions[:top],
        "sql": sql[:top],
    }


def warm_up(send: Callable[[int], None], timeout: float) -> None:
    """One round of an empty cluster: the worker is up and has imported everything."""
    from koordweb.models import Cluster

    cluster, _ = Cluster.objects.get_or_create(name="bench-e2e-warmup")
    run_rounds(cluster, 1, send, timeout)
    cluster.delete()


def measure(
    nodes: int,
    rounds: int,
    send: Callable[[int], None],
    timeout: float,
    cprofile: bool,
    keep: bool,
) -> dict[str, Any]:
    from django.db import connection

    pending = nodes  # 4-GPU pods that exactly fill the idle half
    name = f"bench-e2e-{nodes}"
    started = time.perf_counter()
    cluster = build_cluster(name, nodes, pending)
    build_s = time.perf_counter() - started
    per_round = run_rounds(cluster, rounds, send, timeout)
    bound = sum(r["pods_bound"] or 0 for r in per_round)
    wall = sum(r["wall_ms"] for r in per_round) / 1000
    engine = sum(r["engine_ms"] or 0 for r in per_round)
    outside = sum((r["sync_snapshot_ms"] or 0) + (r["record_enact_ms"] or 0) for r in per_round)
    row: dict[str, Any] = {
        "nodes": nodes,
        "pending_pods": pending,
        "database": connection.vendor,
        "build_rows_s": round(build_s, 2),
        "rounds": per_round,
        "pods_bound": bound,
        "engine_ms": engine,
        "db_enact_ms": outside,
        "db_enact_over_engine": round(outside / engine, 2) if engine else None,
        "pods_per_s_end_to_end": round(bound / wall, 1) if wall else 0.0,
        "pods_per_s_engine": round(bound / (engine / 1000), 1) if engine else 0.0,
    }
    if cprofile:
        cluster = build_cluster(name, nodes, pending)
        row["cprofile"] = profile_first_round(cluster)
    if not keep:
        cluster.delete()
    return row


def run(
    sizes: Sequence[int],
    rounds: int,
    timeout: float,
    cprofile: bool = False,
    keep: bool = False,
    send: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """With `send` None a worker subprocess is started for the run; else `send` queues a round."""
    from django.conf import settings

    worker: SubprocessWorker | None = None
    if send is None:
        queue = f"koordweb-bench-{os.getpid()}"
        worker = SubprocessWorker(queue)
        send = send_round(queue)
    runs = []
    try:  # the worker goes with the run, however it ends (the warm-up included)
        if worker is not None:
            warm_up(send, timeout)
        for n in tqdm(sizes, desc="e2e scale", unit="size", file=sys.stderr):
            runs.append(measure(n, rounds, send, timeout, cprofile, keep))
    finally:
        if worker is not None:
            worker.close()
    return {
        "benchmark": "e2e_scale",
        "broker": settings.CELERY_BROKER_URL.split("://")[0],
        "worker": "subprocess" if worker is not None else "caller",
        "rounds_per_size": rounds,
        "runs": runs,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| nodes | pending pods | bound | engine (ms) | sync+snapshot (ms) | record+enact (ms) |"
        " db+enact / engine | wall (ms) | pods/s end to end | pods/s engine |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        sync = sum(x["sync_snapshot_ms"] or 0 for x in r["rounds"])
        record = sum(x["record_enact_ms"] or 0 for x in r["rounds"])
        wall = sum(x["wall_ms"] for x in r["rounds"])
        lines.append(
            f"| {r['nodes']:,} | {r['pending_pods']:,} | {r['pods_bound']:,} | {r['engine_ms']:,} |"
            f" {sync:,} | {record:,} | {r['db_enact_over_engine']} | {wall:,} |"
            f" {r['pods_per_s_end_to_end']:,.0f} | {r['pods_per_s_engine']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=node_counts, default="1000,5000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a round may take")
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the cluster rows")
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    from django.core.exceptions import ImproperlyConfigured

    try:
        setup_django()
    except ImproperlyConfigured as exc:
        parser.error(f"settings: {exc}")
    pending = unapplied_migrations()
    if pending:
        parser.error(
            f"the database has {pending} unapplied migrations: run `python manage.py migrate` "
            "with the same DATABASE_URL first"
        )
    from benchmarks.common import write_json

    report = run(
        args.nodes,
        args.rounds,
        args.timeout,
        args.cprofile,
        args.keep,
    )
    text = write_json(args.json_path, report)
    print(markdown(report) if args.markdown else text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
