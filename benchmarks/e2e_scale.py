"""End-to-end round scale: rounds through a real Celery worker and the configured database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/koordweb_bench \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
    python -m benchmarks.e2e_scale [--nodes 1000,5000,10000] [--rounds 2] [--json FILE]
        [--cprofile] [--memory 10000:50000] [--latency 1000] [--markdown]

For each size it writes a simulated cluster as rows (bulk_create): nodes of 8 GPUs under
Spine (8 blocks) > Block (16 nodes) > Node, half of them busy with one running 8-GPU pod each, and
pending gangs of 1-16 pods x 4 GPUs (a third MustGather Block, a third PreferGather Spine, the
rest without a rule) that together fill the idle half. It then asks a worker subprocess
(`celery -A koordweb worker --pool solo`, on a queue of its own so no other worker takes the task)
for `koordweb.tasks.run_round` rounds one after another and reads each Round row: `engine_ms`
(in the engine) beside `sync_snapshot_ms` and `record_enact_ms` (database and enact), the
worker's `duration_ms` and the wall time seen from here (queueing included). Pods/s end to end =
pods bound / wall time. After those rounds, rounds run until one reads no changed row (the
kubelet starting pods, the second round's stragglers), then `--steady` rounds where nothing changed
(`steady_round_ms`: their median duration in the worker), then one round after 50 running pods
finished and 50 new ones were submitted (100 changed pods, `changes_round_ms`). `--cprofile` reruns
the first round of each size in this process under cProfile, and a steady round after it, and
keeps the heaviest functions of the database path.

`--memory NODES:PODS` starts a fresh worker, gives it one cluster of NODES nodes and PODS running
pods, runs a cold and a warm round and reads the worker's resident memory from
/proc/<pid>/status (VmRSS after the rounds, VmHWM its peak). `--latency NODES` submits one-pod
jobs at `--arrival-rate` a second for `--arrival-seconds` while asking for a round every
`--interval` seconds (as the beat timer does), and reports submit-to-bound latency p50/p99 (bound:
the end of the round that bound the pod).

Machines differ, so the reference loop of benchmarks.round_scale (`reference_seconds`) runs before
and after, and every rate and time is also printed normalised to a machine whose loop takes
0.05 CPU-s (rates x loop/0.05, times x 0.05/loop). Progress goes to stderr. The cluster rows are
deleted at the end (`--keep` keeps them).
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

from benchmarks.round_scale import node_counts, reference_seconds

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koordweb.settings.local")

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
REFERENCE_LOOP_S = 0.05  # the machine every rate is normalised to
TARGETS = {
    "pods_per_s_end_to_end": 4000,  # at 5,000 nodes and 5,000 pending pods, normalised
    "steady_round_ms": 200,  # at 5,000 nodes
    "changes_round_ms": 400,  # 100 changed pods at 5,000 nodes
    "worker_rss_mib": 1024,  # 10,000 nodes and 50,000 pods
    "latency_p99_intervals": 2,
}


def progress(text: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


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

    from koordweb.models import Cluster, Node, TopologyLayer

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
        one_pod_jobs(
            cluster,
            [f"busy-{k}" for k in range(len(busy))],
            namespace="batch",
            gpus=8,
            priority=10,
            now=now,
            nodes=busy,
            since=now - timedelta(hours=1),
        )
        add_gangs(cluster, pending_pods, rng, now)
    return cluster


def add_gangs(
    cluster: Any, pending_pods: int, rng: random.Random, now: Any, prefix: str = "gang"
) -> None:
    """Pending gangs of 1-16 pods x 4 GPUs that together have `pending_pods` pods, submitted
    `now`: a third MustGather Block, a third PreferGather Spine, the rest without a rule."""
    from django.db import transaction

    from koordweb.models import Job, JobState, Pod

    jobs: list[Any] = []
    pods: list[tuple[int, Any]] = []
    placed = 0
    g = 0
    while placed < pending_pods:
        size = min(rng.choice(GANG_SIZES), pending_pods - placed)
        rule = RULES[g % 3]
        jobs.append(
            Job(
                cluster=cluster,
                namespace="train",
                name=f"{prefix}-{g:05d}",
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
                        name=f"{prefix}-{g:05d}-{p}",
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
    with transaction.atomic():
        saved = Job.objects.bulk_create(jobs, batch_size=1000)
        for job_index, pod in pods:
            pod.job = saved[job_index]
        Pod.objects.bulk_create([p for _j, p in pods], batch_size=1000)


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

    def memory(self) -> dict[str, int]:
        """The worker's resident memory in KiB (/proc/<pid>/status: VmRSS now, VmHWM peak)."""
        found: dict[str, int] = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
        return found

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def send_round(queue: str, expires: float | None = None) -> Callable[[int], None]:
    from koordweb.tasks import run_round

    def send(cluster_id: int) -> None:
        run_round.apply_async(args=[cluster_id, "manual"], queue=queue, expires=expires)

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
        out[-1]["cpu_ms"] = metrics.get("cpu_ms")
        out[-1]["snapshot"] = metrics.get("snapshot")
        out[-1]["changed_rows"] = metrics.get("snapshot_changed_rows")
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


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def add_pending(
    cluster: Any, count: int, gpus: int, prefix: str, duration: int | None = None
) -> None:
    """`count` one-pod jobs of `gpus` GPUs each, submitted now (rows, as job_submit writes them)."""
    from django.db import transaction
    from django.utils import timezone

    with transaction.atomic():
        one_pod_jobs(
            cluster,
            [f"{prefix}-{k}" for k in range(count)],
            namespace="train",
            gpus=gpus,
            priority=500,
            now=timezone.now(),
            duration=duration,
        )


def one_pod_jobs(
    cluster: Any,
    names: Sequence[str],
    *,
    namespace: str,
    gpus: int,
    priority: int,
    now: Any,
    nodes: Sequence[Any] | None = None,
    since: Any = None,
    duration: int | None = None,
) -> None:
    """Jobs of one pod of `gpus` GPUs each, named `names`, their pods created `now`: pending, or
    given `nodes` (one a job) running there, submitted and started `since` (default `now`) and
    bound `now`."""
    from koordweb.models import Job, JobState, Pod, PodPhase

    running = nodes is not None
    since = now if since is None else since
    jobs = Job.objects.bulk_create(
        [
            Job(
                cluster=cluster,
                namespace=namespace,
                name=name,
                priority=priority,
                min_available=1,
                total_number=1,
                state=JobState.RUNNING if running else JobState.PENDING,
                submitted_at=since if running else now,
                started_at=since if running else None,
                duration_seconds=duration,
            )
            for name in names
        ],
        batch_size=1000,
    )
    Pod.objects.bulk_create(
        [
            Pod(
                cluster=cluster,
                job=job,
                namespace=namespace,
                name=f"{job.name}-0",
                requests=gpu_requests(gpus),
                limits=gpu_requests(gpus),
                priority=priority,
                node=nodes[k] if nodes is not None else None,
                phase=PodPhase.RUNNING if running else PodPhase.PENDING,
                created_at=now,
                bound_at=now if running else None,
                started_at=now if running else None,
            )
            for k, job in enumerate(jobs)
        ],
        batch_size=1000,
    )


def finish_running(cluster: Any, count: int) -> int:
    """`count` running pods finish (what the kubelet reports): phase Succeeded."""
    from django.utils import timezone

    from koordweb.models import Pod, PodPhase

    ids = list(
        Pod.objects.filter(cluster=cluster, phase=PodPhase.RUNNING)
        .order_by("id")
        .values_list("id", flat=True)[:count]
    )
    Pod.objects.filter(id__in=ids).update(phase=PodPhase.SUCCEEDED, finished_at=timezone.now())
    return len(ids)


def measure_arrival(
    cluster: Any, nodes: int, pending: int, send: Callable[[int], None], timeout: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A worker that already holds the cluster (warm) sees `pending` new pods arrive.

    Every pod of the gangs placed so far finishes, rounds run until one reads no changed row,
    then a wave of gangs like the first is submitted and one round binds it. Returns that round
    and the settling rounds before it."""
    from django.utils import timezone

    from koordweb.models import Pod, PodPhase

    Pod.objects.filter(cluster=cluster, namespace="train").exclude(
        phase__in=(PodPhase.SUCCEEDED, PodPhase.FAILED)
    ).update(phase=PodPhase.SUCCEEDED, finished_at=timezone.now())
    settle: list[dict[str, Any]] = []
    while len(settle) < 6:
        settle += run_rounds(cluster, 1, send, timeout)
        if settle[-1]["changed_rows"] == 0:
            break
    progress(f"{nodes} nodes: settled after {len(settle)} rounds; {pending} pods arrive")
    add_gangs(cluster, pending, random.Random(nodes + 1), timezone.now(), prefix="wave")
    return run_rounds(cluster, 1, send, timeout)[0], settle


def measure(
    nodes: int,
    rounds: int,
    send: Callable[[int], None],
    timeout: float,
    cprofile: bool,
    keep: bool,
    steady: int = 3,
) -> dict[str, Any]:
    from django.db import connection

    pending = nodes  # 4-GPU pods that exactly fill the idle half
    name = f"bench-e2e-{nodes}"
    progress(f"{nodes} nodes: writing the cluster ({pending} pending pods)")
    started = time.perf_counter()
    cluster = build_cluster(name, nodes, pending)
    build_s = time.perf_counter() - started
    progress(f"{nodes} nodes: rows written in {build_s:.1f}s; first rounds")
    per_round = run_rounds(cluster, rounds, send, timeout)
    first = per_round[0]
    bound = first["pods_bound"] or 0
    wall = first["wall_ms"] / 1000
    engine = first["engine_ms"] or 0
    outside = (first["sync_snapshot_ms"] or 0) + (first["record_enact_ms"] or 0)
    settle: list[dict[str, Any]] = []
    while len(settle) < 6:
        settle += run_rounds(cluster, 1, send, timeout)
        if settle[-1]["changed_rows"] == 0:
            break
    progress(f"{nodes} nodes: settled after {len(settle)} rounds; {steady} steady rounds")
    steady_rounds = run_rounds(cluster, steady, send, timeout)
    finished = finish_running(cluster, 50)
    add_pending(cluster, 100 - finished, 4, "change")
    progress(f"{nodes} nodes: {finished} pods finished, {100 - finished} submitted; one round")
    changes = run_rounds(cluster, 1, send, timeout)[0]
    arrival, arrival_settle = measure_arrival(cluster, nodes, pending, send, timeout)
    a_bound = arrival["pods_bound"] or 0
    a_wall = arrival["wall_ms"] / 1000
    a_engine = arrival["engine_ms"] or 0
    a_outside = (arrival["sync_snapshot_ms"] or 0) + (arrival["record_enact_ms"] or 0)
    row: dict[str, Any] = {
        "nodes": nodes,
        "pending_pods": pending,
        "database": connection.vendor,
        "build_rows_s": round(build_s, 2),
        # The worker already holds the cluster (its warm state), and 5,000 pods arrive.
        "arrival_round": arrival,
        "arrival_settle_rounds": arrival_settle,
        "pods_bound": a_bound,
        "engine_ms": a_engine,
        "db_enact_ms": a_outside,
        "db_enact_over_engine": round(a_outside / a_engine, 2) if a_engine else None,
        "pods_per_s_end_to_end": round(a_bound / a_wall, 1) if a_wall else 0.0,
        "pods_per_s_engine": round(a_bound / (a_engine / 1000), 1) if a_engine else 0.0,
        "pods_per_worker_cpu_s": round(a_bound / (arrival["cpu_ms"] / 1000), 1)
        if arrival["cpu_ms"]
        else 0.0,
        # The worker's first sight of the cluster: its snapshot is built cold.
        "rounds": per_round,
        "cold_pods_bound": bound,
        "cold_engine_ms": engine,
        "cold_db_enact_ms": outside,
        "cold_pods_per_s_end_to_end": round(bound / wall, 1) if wall else 0.0,
        "cold_round_cpu_ms": first["cpu_ms"],
        "settle_rounds": settle,
        "steady_rounds": steady_rounds,
        "steady_round_ms": _median([r["duration_ms"] or 0 for r in steady_rounds]),
        "steady_round_wall_ms": _median([r["wall_ms"] for r in steady_rounds]),
        "steady_round_cpu_ms": _median([r["cpu_ms"] or 0 for r in steady_rounds]),
        "changes_round": changes,
        "changes_round_ms": changes["duration_ms"],
        "changes_round_cpu_ms": changes["cpu_ms"],
    }
    if cprofile:
        progress(f"{nodes} nodes: cProfile of a first round and a steady round, in this process")
        from django.utils import timezone

        from koordweb.tasks import run_round

        # This process holds the cluster warm (settled), then the wave arrives.
        cluster = build_cluster(name, nodes, 0)
        for _ in range(len(settle) + 1):
            run_round(cluster.id, "manual")
        add_gangs(cluster, pending, random.Random(nodes + 1), timezone.now(), prefix="wave")
        row["cprofile"] = profile_first_round(cluster)
        for _ in range(len(settle) + 1):
            run_round(cluster.id, "manual")
        row["cprofile_steady"] = profile_first_round(cluster)
    if not keep:
        cluster.delete()
    progress(
        f"{nodes} nodes: {row['pods_per_s_end_to_end']:,.0f} pods/s end to end as pods arrive"
        f" ({row['cold_pods_per_s_end_to_end']:,.0f} on the worker's first sight), steady round "
        f"{row['steady_round_ms']} ms, 100 changes {row['changes_round_ms']} ms"
    )
    return row


def build_memory_cluster(name: str, nodes: int, pods: int) -> Any:
    """NODES nodes and PODS running one-GPU pods spread over them (one job each)."""
    from django.db import transaction
    from django.utils import timezone

    from koordweb.models import Cluster, Node

    now = timezone.now()
    Cluster.objects.filter(name=name).delete()
    with transaction.atomic():
        cluster = Cluster.objects.create(name=name, backend=Cluster.Backend.SIMULATED)
        node_rows = Node.objects.bulk_create(
            [
                Node(
                    cluster=cluster,
                    name=f"node-{i:05d}",
                    labels={SPINE: f"spine-{i // 128}", BLOCK: f"block-{i // 16}"},
                    allocatable=dict(NODE_ALLOC),
                    capacity=dict(NODE_ALLOC),
                )
                for i in range(nodes)
            ],
            batch_size=2000,
        )
        for start in range(0, pods, 5000):
            count = min(5000, pods - start)
            one_pod_jobs(
                cluster,
                [f"run-{start + k}" for k in range(count)],
                namespace="batch",
                gpus=1,
                priority=10,
                now=now,
                nodes=[node_rows[(start + k) % nodes] for k in range(count)],
            )
            progress(f"memory: {start + count} of {pods} pods written")
    return cluster


def measure_memory(nodes: int, pods: int, timeout: float, keep: bool) -> dict[str, Any]:
    """A fresh worker holding one cluster of NODES nodes and PODS pods: its resident memory."""
    queue = f"koordweb-bench-mem-{os.getpid()}"
    worker = SubprocessWorker(queue)
    send = send_round(queue)
    try:
        warm_up(send, timeout)
        before = worker.memory()
        progress(f"memory: worker up ({before.get('VmRSS', 0) // 1024} MiB); writing the cluster")
        cluster = build_memory_cluster(f"bench-e2e-mem-{nodes}", nodes, pods)
        rounds = run_rounds(cluster, 2, send, timeout)
        after = worker.memory()
        if not keep:
            cluster.delete()
    finally:
        worker.close()
    return {
        "nodes": nodes,
        "pods": pods,
        "rounds": rounds,
        "source": "/proc/<worker pid>/status",
        "idle_worker_rss_mib": round(before.get("VmRSS", 0) / 1024, 1),
        "worker_rss_mib": round(after.get("VmRSS", 0) / 1024, 1),
        "worker_peak_rss_mib": round(after.get("VmHWM", 0) / 1024, 1),
    }


def measure_latency(
    nodes: int,
    queue: str,
    rate: float,
    seconds: float,
    interval: float,
    timeout: float,
    keep: bool,
) -> dict[str, Any]:
    """Submit one-pod jobs at `rate` a second while a round is asked for every `interval`."""
    from koordweb.models import Pod, Round

    cluster = build_cluster(f"bench-e2e-lat-{nodes}", nodes, 0)
    send = send_round(queue, expires=interval)
    progress(f"latency: {nodes} nodes, {rate}/s for {seconds:.0f}s, a round every {interval}s")
    started = time.monotonic()
    next_job = next_round = started
    submitted = 0
    while time.monotonic() - started < seconds:
        now = time.monotonic()
        if now >= next_job:
            add_pending(cluster, 1, 1, f"arrival-{submitted}", duration=30)
            submitted += 1
            next_job += 1 / rate
        if now >= next_round:
            send(cluster.id)
            next_round += interval
        time.sleep(max(0.0, min(next_job, next_round) - time.monotonic()))
    deadline = time.monotonic() + timeout
    arrivals = Pod.objects.filter(cluster=cluster, name__startswith="arrival-")
    while arrivals.filter(bound_at__isnull=True).exists() and time.monotonic() < deadline:
        send(cluster.id)
        time.sleep(interval)
    time.sleep(2 * interval)  # the last round finishes and records
    ends = {
        r.started_at: r.started_at + timedelta(milliseconds=r.duration_ms or 0)
        for r in Round.objects.filter(cluster=cluster, state=Round.State.SUCCEEDED)
    }
    latencies = sorted(
        (ends[bound] - submitted_at).total_seconds()
        for bound, submitted_at in arrivals.filter(bound_at__isnull=False).values_list(
            "bound_at", "job__submitted_at"
        )
        if bound in ends
    )
    rounds = Round.objects.filter(cluster=cluster, state=Round.State.SUCCEEDED)
    durations = sorted(r for r in rounds.values_list("duration_ms", flat=True) if r is not None)
    if not keep:
        cluster.delete()

    def pct(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3)

    return {
        "nodes": nodes,
        "arrival_rate": rate,
        "seconds": seconds,
        "round_interval_s": interval,
        "submitted": submitted,
        "bound": len(latencies),
        "rounds": len(durations),
        "round_ms_p50": durations[len(durations) // 2] if durations else None,
        "round_ms_max": durations[-1] if durations else None,
        "latency_p50_s": pct(0.5) if latencies else None,
        "latency_p99_s": pct(0.99) if latencies else None,
        "latency_p99_intervals": round(pct(0.99) / interval, 2) if latencies else None,
    }


def run(
    sizes: Sequence[int],
    rounds: int,
    timeout: float,
    cprofile: bool = False,
    keep: bool = False,
    send: Callable[[int], None] | None = None,
    steady: int = 3,
    memory: tuple[int, int] | None = None,
    latency: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """With `send` None a worker subprocess is started for the run; else `send` queues a round."""
    from django.conf import settings

    reference_before = reference_seconds()
    progress(f"reference loop {reference_before:.3f} CPU-s")
    worker: SubprocessWorker | None = None
    queue = f"koordweb-bench-{os.getpid()}"
    if send is None:
        worker = SubprocessWorker(queue)
        send = send_round(queue)
    runs = []
    latency_row: dict[str, Any] | None = None
    try:  # the worker goes with the run, however it ends (the warm-up included)
        if worker is not None:
            warm_up(send, timeout)
        for n in tqdm(sizes, desc="e2e scale", unit="size", file=sys.stderr):
            runs.append(measure(n, rounds, send, timeout, cprofile, keep, steady))
        if latency is not None and worker is not None:
            latency_row = measure_latency(queue=queue, timeout=timeout, keep=keep, **latency)
    finally:
        if worker is not None:
            worker.close()
    memory_row = measure_memory(*memory, timeout, keep) if memory else None
    reference_after = reference_seconds()
    progress(f"reference loop {reference_after:.3f} CPU-s")
    reference = round((reference_before + reference_after) / 2, 3)
    report = {
        "benchmark": "e2e_scale",
        "broker": settings.CELERY_BROKER_URL.split("://")[0],
        "worker": "subprocess" if worker is not None else "caller",
        "rounds_per_size": rounds,
        "warm_snapshot": bool(settings.KOORDWEB_WARM_SNAPSHOT),
        "reference_seconds": {"before": reference_before, "after": reference_after},
        "reference_loop_s": reference,
        "normalised_to_loop_s": REFERENCE_LOOP_S,
        "runs": runs,
        "memory": memory_row,
        "latency": latency_row,
    }
    normalise(report)
    return report


def normalise(report: dict[str, Any]) -> None:
    """Each rate and time also as on a machine whose reference loop takes 0.05 CPU-s."""
    factor = (report["reference_loop_s"] or REFERENCE_LOOP_S) / REFERENCE_LOOP_S
    for r in report["runs"]:
        r["normalised"] = {
            "pods_per_s_end_to_end": round(r["pods_per_s_end_to_end"] * factor, 1),
            "pods_per_s_engine": round(r["pods_per_s_engine"] * factor, 1),
            "engine_ms": round(r["engine_ms"] / factor),
            "db_enact_ms": round(r["db_enact_ms"] / factor),
            "steady_round_ms": round(r["steady_round_ms"] / factor),
            "changes_round_ms": round((r["changes_round_ms"] or 0) / factor),
            "steady_round_cpu_ms": round(r["steady_round_cpu_ms"] / factor),
            "changes_round_cpu_ms": round((r["changes_round_cpu_ms"] or 0) / factor),
            "pods_per_worker_cpu_s": round(r["pods_per_worker_cpu_s"] * factor, 1),
            "cold_pods_per_s_end_to_end": round(r["cold_pods_per_s_end_to_end"] * factor, 1),
            "cold_db_enact_ms": round(r["cold_db_enact_ms"] / factor),
            "cold_engine_ms": round(r["cold_engine_ms"] / factor),
        }
    latency = report.get("latency")
    if latency and latency.get("latency_p50_s") is not None:
        latency["normalised"] = {
            "latency_p50_s": round(latency["latency_p50_s"] / factor, 3),
            "latency_p99_s": round(latency["latency_p99_s"] / factor, 3),
            "round_ms_p50": round((latency["round_ms_p50"] or 0) / factor),
        }


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def markdown(report: dict[str, Any]) -> str:
    factor = (report.get("reference_loop_s") or REFERENCE_LOOP_S) / REFERENCE_LOOP_S
    ref = report.get("reference_seconds") or {}
    lines = [
        f"Reference loop on this run's machine: {ref.get('before')} CPU-s before, "
        f"{ref.get('after')} after (mean {report.get('reference_loop_s')}); normalised figures "
        f"(in brackets) are as on a {REFERENCE_LOOP_S} CPU-s machine: rates x {factor:.2f}, times "
        f"/ {factor:.2f}. Warm snapshot: {'on' if report.get('warm_snapshot') else 'off'}.",
        "",
        "Pods arriving at a worker that holds the cluster (its warm snapshot), and the worker's"
        " first sight of the cluster (built cold):",
        "",
        "| nodes | pods bound | engine (ms) | sync+snapshot (ms) | record+enact (ms) |"
        " db+enact / engine | wall (ms) | pods/s end to end | pods/s engine |"
        " first sight: pods/s end to end | first sight: db+enact (ms) |"
        " steady round (ms) | 100 changed pods (ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        arrival = r["arrival_round"]
        n = r.get("normalised") or {}
        lines.append(
            f"| {r['nodes']:,} | {r['pods_bound']:,} | {r['engine_ms']:,} |"
            f" {arrival['sync_snapshot_ms'] or 0:,} | {arrival['record_enact_ms'] or 0:,} |"
            f" {r['db_enact_over_engine']} | {arrival['wall_ms']:,} |"
            f" {r['pods_per_s_end_to_end']:,.0f} [{n.get('pods_per_s_end_to_end', 0):,.0f}] |"
            f" {r['pods_per_s_engine']:,.0f} [{n.get('pods_per_s_engine', 0):,.0f}] |"
            f" {r['cold_pods_per_s_end_to_end']:,.0f}"
            f" [{n.get('cold_pods_per_s_end_to_end', 0):,.0f}] |"
            f" {r['cold_db_enact_ms']:,} [{n.get('cold_db_enact_ms', 0):,}] |"
            f" {r['steady_round_ms']:,.0f} [{n.get('steady_round_ms', 0):,}] |"
            f" {r['changes_round_ms'] or 0:,} [{n.get('changes_round_ms', 0):,}] |"
        )
    lines += [
        "",
        "The worker's own CPU time (`cpu_ms` of the Round; the database server's is not in it),"
        " normalised the same way:",
        "",
        "| nodes | arrival round CPU (ms) | pods per worker CPU-s | first sight CPU (ms) |"
        " steady round CPU (ms) | 100 changed pods CPU (ms) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        n = r.get("normalised") or {}
        lines.append(
            f"| {r['nodes']:,} | {r['arrival_round']['cpu_ms'] or 0:,} |"
            f" {r['pods_per_worker_cpu_s']:,.0f} [{n.get('pods_per_worker_cpu_s', 0):,.0f}] |"
            f" {r['cold_round_cpu_ms'] or 0:,} |"
            f" {r['steady_round_cpu_ms']:,.0f} [{n.get('steady_round_cpu_ms', 0):,}] |"
            f" {r['changes_round_cpu_ms'] or 0:,} [{n.get('changes_round_cpu_ms', 0):,}] |"
        )
    lines += ["", "| target | measured (normalised) | |", "|---|---|---|"]
    at5k = next((r for r in report["runs"] if r["nodes"] == 5000), None)
    if at5k is not None:
        n = at5k["normalised"]
        lines += [
            f"| >= 4,000 pods/s end to end at 5,000 nodes | {n['pods_per_s_end_to_end']:,.0f} |"
            f" {_met(n['pods_per_s_end_to_end'] >= TARGETS['pods_per_s_end_to_end'])} |",
            f"| db + enact <= engine at 5,000 nodes | {n['db_enact_ms']:,} vs {n['engine_ms']:,} ms"
            f" | {_met(n['db_enact_ms'] <= n['engine_ms'])} |",
            f"| steady round <= 200 ms at 5,000 nodes | {n['steady_round_ms']:,} ms |"
            f" {_met(n['steady_round_ms'] <= TARGETS['steady_round_ms'])} |",
            f"| 100 changed pods <= 400 ms at 5,000 nodes | {n['changes_round_ms']:,} ms |"
            f" {_met(n['changes_round_ms'] <= TARGETS['changes_round_ms'])} |",
        ]
    memory = report.get("memory")
    if memory:
        lines.append(
            f"| worker with {memory['nodes']:,} nodes + {memory['pods']:,} pods <= 1 GiB resident |"
            f" {memory['worker_rss_mib']:,} MiB VmRSS (peak {memory['worker_peak_rss_mib']:,}) |"
            f" {_met(memory['worker_peak_rss_mib'] <= TARGETS['worker_rss_mib'])} |"
        )
    latency = report.get("latency")
    if latency and latency.get("latency_p99_s") is not None:
        lines.append(
            f"| submit-to-bound p99 <= 2 round intervals ({latency['arrival_rate']:.0f} jobs/s, "
            f"{latency['nodes']:,} nodes, {latency['round_interval_s']} s interval) |"
            f" p50 {latency['latency_p50_s']} s, p99 {latency['latency_p99_s']} s"
            f" ({latency['latency_p99_intervals']} intervals; normalised p99"
            f" {latency['normalised']['latency_p99_s']} s) |"
            f" {_met(latency['latency_p99_intervals'] <= TARGETS['latency_p99_intervals'])} |"
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
    parser.add_argument("--steady", type=int, default=3, help="steady rounds per size")
    parser.add_argument(
        "--memory", default="", help="NODES:PODS: a fresh worker's memory with one such cluster"
    )
    parser.add_argument("--latency", type=int, default=0, help="NODES for the latency run")
    parser.add_argument("--arrival-rate", type=float, default=20.0)
    parser.add_argument("--arrival-seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between rounds")
    args = parser.parse_args(argv)
    memory: tuple[int, int] | None = None
    if args.memory:
        nodes_text, _, pods_text = args.memory.partition(":")
        if not (nodes_text.isdigit() and pods_text.isdigit()):
            parser.error("--memory must be NODES:PODS")
        memory = (int(nodes_text), int(pods_text))
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

    latency = (
        {
            "nodes": args.latency,
            "rate": args.arrival_rate,
            "seconds": args.arrival_seconds,
            "interval": args.interval,
        }
        if args.latency
        else None
    )
    report = run(
        args.nodes,
        args.rounds,
        args.timeout,
        args.cprofile,
        args.keep,
        steady=args.steady,
        memory=memory,
        latency=latency,
    )
    text = write_json(args.json_path, report)
    print(markdown(report) if args.markdown else text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
