"""Tenant isolation (issue #36): one tenant at its limits, another tenant's latencies before and
during.

    python -m benchmarks.tenant_isolation [--samples 20] [--parked-jobs 500] [--markdown]

Three processes, as deployed: this one serves the measured tenant's requests through the whole
HTTP stack (Django's test client: middleware, authentication, throttles, DRF views), a worker
process runs the cluster's rounds every `--interval` s (simulated backend, warm snapshot), and in
the "during" phases a third process is the noisy tenant: it has parked its quota's
`max_pending_jobs` / `max_pending_pods` in jobs whose node selector no node matches (submitted
through the API until the 429), holds the most live tokens a user may (the next one refused), and
sends what-ifs, submissions and job lists round-robin over its tokens as fast as it is answered
(most of them 429: its rate limits hit).

The quiet tenant (team-b, a user per phase) submits a small job that fits, asks a what-if and
lists its jobs `--samples` times each; the median and p95 of each, and the ratio during / quiet
against the 2x target, are reported, with each request's own CPU time (median): wall time above
it is waiting for a core, a lock or the database, which on a shared machine is most of it.
Phases: quiet (nothing parked), during (the noisy tenant at its limits), and, unless
`--no-compare`, during again with the rounds' back-off turned off (every parked job planned every
round: what issue #36 removed).

SQLite in a private directory by default (`KOORDWEB_VAR_DIR`: database, cache, locks); a
DATABASE_URL (and REDIS_URL for the cache, as in production) is used as given (the benchmark's
cluster, quotas and users are named `tenant-isolation*` and replaced on every run). `--markdown`
rewrites the section of docs/reliability.md of the database it ran on, between its markers
(`markers`). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.common import rewrite_between, write_json

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "reliability.md"
BEGIN = "<!-- section: tenant_isolation; written by benchmarks/tenant_isolation.py -->"
END = "<!-- end section: tenant_isolation -->"


def markers(database: str) -> tuple[str, str]:
    """The section's markers: SQLite's as above, another database's named after it (each run
    rewrites the section of the database it ran on)."""
    if database == "sqlite":
        return BEGIN, END
    name = f"tenant_isolation_{database}"
    return (
        f"<!-- section: {name}; written by benchmarks/tenant_isolation.py -->",
        f"<!-- end section: {name} -->",
    )


CLUSTER = "tenant-isolation"
NOISY, QUIET = "tenant-isolation-a", "tenant-isolation-b"
TARGET_RATIO = 2.0
GI = 1024**3
NODE = {"cpu": 32_000, "memory": 256 * GI, "pods": 110}
# The noisy tenant's pods: 1 CPU and 1 GiB that no node selects.
PARKED_POD = {"requests": {"cpu": "1", "memory": "1Gi"}, "node_selector": {"pool": "nowhere"}}
SMALL_POD = {"requests": {"cpu": "1", "memory": "1Gi"}}
OPERATIONS = ("submit", "whatif", "list")
SETTINGS = "koordweb.settings.production"  # a deployment's settings (DEBUG off)


def progress(text: str) -> None:
    print(f"[tenant_isolation {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def environment(var_dir: str) -> None:
    """Settings for every process of the run: its own var directory (SQLite database, file cache
    shared by the processes, lock files) unless DATABASE_URL names the database."""
    os.environ["KOORDWEB_VAR_DIR"] = var_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS)
    os.environ.setdefault("SECRET_KEY", "tenant-isolation-benchmark-" + "k" * 40)
    os.environ.setdefault("KOORDWEB_WARM_SNAPSHOT", "true")
    os.environ.setdefault("KOORDWEB_HTTPS", "false")  # the test client speaks plain HTTP


def setup_django(migrate: bool = False) -> None:
    import logging

    import django

    django.setup()
    # Every 429 the noisy tenant gets would be a warning line: the counts are reported instead.
    logging.getLogger("django.request").setLevel(logging.ERROR)
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


# The world ----------------------------------------------------------------------------------


@dataclass
class World:
    cluster_id: int
    noisy_user: Any
    quiet_users: list[Any]
    noisy_tokens: list[str] = field(default_factory=list)


def build_world(*, nodes: int, parked_jobs: int, parked_pods: int, quiet_users: int = 3) -> World:
    """The cluster (simulated, `nodes` nodes), two team quotas in their own namespaces and their
    users; the noisy team's limits are `parked_jobs` jobs / `parked_pods` pods, its max sized so
    its parked demand saturates it (cpu and memory, the resources its pods ask for)."""
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from koordweb.models import Cluster, ElasticQuota, Node, PriorityClass

    user_model = get_user_model()
    with transaction.atomic():
        Cluster.objects.filter(name=CLUSTER).delete()
        user_model.objects.filter(username__startswith=CLUSTER).delete()
        cluster = Cluster.objects.create(name=CLUSTER, backend=Cluster.Backend.SIMULATED)
        Node.objects.bulk_create(
            [
                Node(
                    cluster=cluster,
                    name=f"iso-node-{i:03d}",
                    allocatable=dict(NODE),
                    capacity=dict(NODE),
                    labels={"pool": "general"},
                )
                for i in range(nodes)
            ]
        )
        PriorityClass.objects.create(
            cluster=cluster, name="iso-batch", value=5000, global_default=True
        )
        noisy = user_model.objects.create_user(username=NOISY, password=None)
        quiet = [
            user_model.objects.create_user(username=f"{QUIET}-{i}", password=None)
            for i in range(quiet_users)
        ]
        limits = {"cpu": 16_000, "memory": 16 * GI}
        team_a = ElasticQuota.objects.create(
            cluster=cluster,
            name=NOISY,
            namespace=NOISY,
            min={},
            max=limits,
            max_pending_jobs=parked_jobs,
            max_pending_pods=parked_pods,
        )
        team_a.members.add(noisy)
        team_b = ElasticQuota.objects.create(
            cluster=cluster,
            name=QUIET,
            namespace=QUIET,
            min={},
            max={"cpu": 200_000, "memory": 2000 * GI},
        )
        team_b.members.add(*quiet)
    return World(cluster.id, noisy, quiet)


def body(name: str, *, quota: str, pod: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": quota,
        "cluster": CLUSTER,
        "quota": quota,
        "replicas": replicas,
        "pod": pod,
        "topology": None,
        "duration_seconds": 120,
    }


def client_for(token: str) -> Any:
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def token_for(user: Any) -> str:
    from koordweb.services.tokens import token_create

    return token_create(user=user)[1]


def tokens_to_the_cap(user: Any) -> tuple[list[str], str]:
    """Every live token a user may hold, and what the one past the cap was answered."""
    from django.core.exceptions import ValidationError as DjangoValidationError
    from rest_framework.exceptions import ValidationError

    from koordweb.services.tokens import max_tokens_per_user

    tokens = [token_for(user) for _ in range(max_tokens_per_user())]
    try:
        token_for(user)
        refused = "accepted (no cap)"
    except (ValidationError, DjangoValidationError) as error:
        refused = f"refused: {error}"[:120]
    return tokens, refused


def park(world: World, *, jobs: int, pods: int) -> dict[str, Any]:
    """The noisy tenant fills its quota's waiting limits through the API, then is refused."""
    client = client_for(world.noisy_tokens[0])
    per_job = max(1, pods // max(1, jobs))
    codes: Counter[int] = Counter()
    started = time.perf_counter()
    for i in range(jobs + 1):
        answer = client.post(
            "/api/v1/jobs/",
            body(f"parked-{i}", quota=NOISY, pod=PARKED_POD, replicas=per_job),
            format="json",
        )
        codes[answer.status_code] += 1
        if i and i % 100 == 0:
            progress(f"parked {i} jobs ({dict(codes)})")
    last = answer.json() if answer.status_code == 429 else {}
    return {
        "answers": dict(codes),
        "refused_with": last.get("limit", ""),
        "pods_per_job": per_job,
        "seconds": round(time.perf_counter() - started, 1),
    }


# Measuring ----------------------------------------------------------------------------------


def timed(call: Callable[[], Any]) -> tuple[float, int, float]:
    """Wall time in ms, the status code, and this thread's CPU time in ms (the request's own
    work: wall time above it is waiting for a core, a lock or the database)."""
    started, cpu = time.perf_counter(), time.thread_time()
    answer = call()
    return (
        (time.perf_counter() - started) * 1000,
        answer.status_code,
        (time.thread_time() - cpu) * 1000,
    )


def measure(token: str, *, samples: int, tag: str) -> dict[str, list[tuple[float, int, float]]]:
    """The quiet tenant's three operations, `samples` times each, interleaved."""
    client = client_for(token)
    out: dict[str, list[tuple[float, int, float]]] = {op: [] for op in OPERATIONS}

    def submit(i: int) -> Any:
        payload = body(f"quiet-{tag}-{i}", quota=QUIET, pod=SMALL_POD)
        return client.post("/api/v1/jobs/", payload, format="json")

    def whatif(i: int) -> Any:
        payload = body(f"probe-{tag}-{i}", quota=QUIET, pod=SMALL_POD)
        return client.post("/api/v1/whatif/", payload, format="json")

    for i in range(samples):
        out["submit"].append(timed(partial(submit, i)))
        out["whatif"].append(timed(partial(whatif, i)))
        out["list"].append(timed(lambda: client.get("/api/v1/jobs/", {"limit": 50})))
    return out


def summary(samples: Sequence[tuple[float, ...]]) -> dict[str, Any]:
    """Median and p95 in ms of the answered requests, and the status codes seen; with CPU times
    (`timed`), their median too."""
    times = sorted(sample[0] for sample in samples)
    codes = Counter(int(sample[1]) for sample in samples)
    if not times:
        return {"n": 0, "median": 0.0, "p95": 0.0, "codes": {}}
    p95 = times[min(len(times) - 1, max(0, round(0.95 * len(times)) - 1))]
    out = {
        "n": len(times),
        "median": round(statistics.median(times), 1),
        "p95": round(p95, 1),
        "codes": {str(k): v for k, v in sorted(codes.items())},
    }
    cpu = [sample[2] for sample in samples if len(sample) > 2]
    if cpu:
        out["cpu_median"] = round(statistics.median(cpu), 1)
    return out


def ratios(quiet: dict[str, Any], during: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """during / quiet per operation and statistic, and whether each is within the target."""
    out: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        row: dict[str, Any] = {}
        for stat in ("median", "p95"):
            base = quiet[op][stat] or 1e-9
            ratio = round(during[op][stat] / base, 2)
            row[stat] = ratio
        row["met"] = row["median"] <= TARGET_RATIO and row["p95"] <= TARGET_RATIO
        out[op] = row
    return out


def round_stats(cluster_id: int, since: float, until: float) -> dict[str, Any]:
    """The rounds the worker ran in a phase: count, median and max duration, the worker's CPU
    time, jobs planned and jobs held back (medians)."""
    from datetime import UTC, datetime

    from koordweb.models import Round

    rows = list(
        Round.objects.filter(
            cluster_id=cluster_id,
            started_at__gte=datetime.fromtimestamp(since, UTC),
            started_at__lte=datetime.fromtimestamp(until, UTC),
        ).values_list("state", "duration_ms", "jobs_considered", "metrics")
    )
    ok = [r for r in rows if r[0] == "succeeded"]
    failed = sum(1 for r in rows if r[0] == "failed")  # one still running is neither
    if not ok:
        return {"rounds": len(rows), "failed": failed}
    return {
        "rounds": len(rows),
        "failed": failed,
        "duration_ms_median": int(statistics.median(r[1] or 0 for r in ok)),
        "duration_ms_max": max(r[1] or 0 for r in ok),
        "cpu_ms_median": int(statistics.median((r[3] or {}).get("cpu_ms", 0) for r in ok)),
        "jobs_planned_median": int(statistics.median(r[2] for r in ok)),
        "held_back_median": int(
            statistics.median((r[3] or {}).get("backoff_held_jobs", 0) for r in ok)
        ),
    }


# The other processes ------------------------------------------------------------------------


def spawn(role: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.tenant_isolation", "--role", role, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def rounds_loop(cluster_id: int, interval: float, backoff: bool) -> None:
    """The worker: a round every `interval` s until stdin closes or it is terminated."""
    from django.utils import timezone

    from koordweb.backends.simulated import SimulatedBackend
    from koordweb.engine import pipeline as records
    from koordweb.engine.backoff import HoldReport
    from koordweb.models import Cluster, Round

    if not backoff:
        records.backoff_hold = lambda cluster_id, snapshot, profile: (snapshot, HoldReport())  # type: ignore[assignment]
    cluster = Cluster.objects.get(pk=cluster_id)
    backend = SimulatedBackend()
    while True:
        started = time.monotonic()
        try:
            records.round_execute(
                cluster=cluster, backend=backend, trigger=Round.Trigger.TIMER, now=timezone.now()
            )
        except Exception as error:  # recorded as a failed round; go on, as the worker would
            print(f"round failed: {error}", file=sys.stderr, flush=True)
        time.sleep(max(0.0, interval - (time.monotonic() - started)))


def noisy_loop(tokens: list[str], seconds: float, stop: str) -> None:
    """The noisy tenant: what-if, submit, list, round-robin over its tokens, as fast as it is
    answered, until the file `stop` exists (at most `seconds`); prints the status codes it got
    as JSON."""
    clients = [client_for(t) for t in tokens]
    codes: dict[str, Counter[int]] = {op: Counter() for op in OPERATIONS}
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline and not os.path.exists(stop):
        client = clients[i % len(clients)]
        op = OPERATIONS[i % 3 - 2]  # whatif, list, submit, ...
        if op == "whatif":
            answer = client.post(
                "/api/v1/whatif/", body(f"n-{i}", quota=NOISY, pod=PARKED_POD), format="json"
            )
        elif op == "submit":
            answer = client.post(
                "/api/v1/jobs/", body(f"more-{i}", quota=NOISY, pod=PARKED_POD), format="json"
            )
        else:
            answer = client.get("/api/v1/jobs/", {"limit": 50})
        codes[op][answer.status_code] += 1
        i += 1
    print(json.dumps({op: dict(c) for op, c in codes.items()}), flush=True)


def no_round_requests() -> None:
    """Submissions ask for a round on commit; here the worker's timed rounds stand in for the
    broker (no Celery in the benchmark)."""
    from koordweb import tasks

    tasks.run_round.apply_async = lambda *args, **kwargs: None  # type: ignore[method-assign]


# Phases -------------------------------------------------------------------------------------


def phase(
    name: str,
    world: World,
    token: str,
    *,
    samples: int,
    noisy_seconds: float = 0.0,
    settle: float = 0.0,
) -> dict[str, Any]:
    noisy = None
    stop = os.path.join(os.environ["KOORDWEB_VAR_DIR"], f"stop-{name}")
    if noisy_seconds:
        noisy = spawn(
            "noisy",
            "--tokens",
            ",".join(world.noisy_tokens),
            "--seconds",
            str(noisy_seconds),
            "--stop",
            stop,
        )
    if settle:
        progress(f"{name}: letting the rounds back off for {settle:.0f} s")
        time.sleep(settle)
    progress(f"{name}: measuring {samples} x {', '.join(OPERATIONS)}")
    since = time.time()
    raw = measure(token, samples=samples, tag=name)
    until = time.time()
    result: dict[str, Any] = {op: summary(raw[op]) for op in OPERATIONS}
    result["seconds"] = round(until - since, 1)
    result["rounds"] = round_stats(world.cluster_id, since, until)
    if noisy is not None:
        Path(stop).touch()
        out, _ = noisy.communicate(timeout=noisy_seconds + 60)
        result["noisy"] = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    progress(
        f"{name}: "
        + ", ".join(
            f"{op} {result[op]['median']} / {result[op]['p95']} ms "
            f"(CPU {result[op].get('cpu_median', '-')} ms)"
            for op in OPERATIONS
        )
        + f"; rounds {result['rounds']}"
    )
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    from django.db import connection

    started = time.perf_counter()
    no_round_requests()
    world = build_world(
        nodes=args.nodes, parked_jobs=args.parked_jobs, parked_pods=args.parked_pods
    )
    quiet_tokens = [token_for(u) for u in world.quiet_users]
    worker = spawn("rounds", "--cluster", str(world.cluster_id), "--interval", str(args.interval))
    try:
        measure(quiet_tokens[0], samples=2, tag="warmup")
        quiet = phase("quiet", world, quiet_tokens[0], samples=args.samples)
        world.noisy_tokens, token_cap = tokens_to_the_cap(world.noisy_user)
        progress(f"noisy tenant: {len(world.noisy_tokens)} tokens, the next {token_cap}")
        progress(f"noisy tenant parks {args.parked_jobs} jobs / {args.parked_pods} pods")
        parked = park(world, jobs=args.parked_jobs, pods=args.parked_pods)
        progress(f"parked: {parked}")
        seconds = args.samples * 2 + args.settle + 60  # a bound: stopped when measured
        during = phase(
            "during",
            world,
            quiet_tokens[1],
            samples=args.samples,
            noisy_seconds=seconds,
            settle=args.settle,
        )
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    result: dict[str, Any] = {
        "database": connection.vendor,
        "nodes": args.nodes,
        "interval_s": args.interval,
        "samples": args.samples,
        "parked": parked,
        "parked_jobs": args.parked_jobs,
        "parked_pods": args.parked_pods,
        "token_cap": token_cap,
        "quiet": quiet,
        "during": during,
        "ratios": ratios(quiet, during),
    }
    if args.compare:
        worker = spawn(
            "rounds",
            "--cluster",
            str(world.cluster_id),
            "--interval",
            str(args.interval),
            "--no-backoff",
        )
        try:
            without = phase(
                "during-no-backoff",
                world,
                quiet_tokens[2],
                samples=args.samples,
                noisy_seconds=args.samples * 2 + args.settle + 60,
                settle=args.settle,
            )
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        result["during_without_backoff"] = without
        result["ratios_without_backoff"] = ratios(quiet, without)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["run_at"] = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
    return result


# Report -------------------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    """The section of docs/reliability.md, between its markers."""
    names = {"submit": "submit (`POST /api/v1/jobs/`)", "whatif": "what-if", "list": "job list"}
    phases = [("quiet", "quiet"), ("during", "during")]
    if "during_without_backoff" in result:
        phases.append(("during_without_backoff", "during, back-off off"))
    head = "| operation | " + " | ".join(f"{label} median / p95" for _, label in phases)
    head += " | ratio during / quiet (median, p95) | within 2x |"
    begin, end = markers(result["database"])
    lines = [begin, "", head, "|---" * (len(phases) + 3) + "|"]
    for op in OPERATIONS:
        cells = [f"{result[key][op]['median']} / {result[key][op]['p95']} ms" for key, _ in phases]
        r = result["ratios"][op]
        verdict = "met" if r["met"] else "**not met**"
        lines.append(
            f"| {names[op]} | "
            + " | ".join(cells)
            + f" | {r['median']}x, {r['p95']}x | {verdict} |"
        )
    if "ratios_without_backoff" in result:
        r = result["ratios_without_backoff"]
        lines.append(
            "| ratio with the back-off off (median) | "
            + " | ".join("" for _ in phases)
            + " | "
            + ", ".join(f"{op} {r[op]['median']}x" for op in OPERATIONS)
            + " | |"
        )
    lines.append("")
    for key, label in phases:
        rounds = result[key]["rounds"]
        noisy = result[key].get("noisy")
        text = (
            f"- {label}: {rounds.get('rounds', 0)} rounds "
            f"({rounds.get('failed', 0)} failed), median {rounds.get('duration_ms_median', '-')} "
            f"ms, max {rounds.get('duration_ms_max', '-')} ms, worker CPU (median) "
            f"{rounds.get('cpu_ms_median', '-')} ms, jobs planned (median) "
            f"{rounds.get('jobs_planned_median', '-')}, held back (median) "
            f"{rounds.get('held_back_median', '-')}"
        )
        if "cpu_median" in result[key]["whatif"]:
            text += "; the measured tenant's CPU per request (median) " + ", ".join(
                f"{op} {result[key][op]['cpu_median']} ms" for op in OPERATIONS
            )
        if noisy:
            text += "; the noisy tenant's answers " + ", ".join(
                f"{op} {codes}" for op, codes in noisy.items()
            )
        lines.append(text)
    parked = result["parked"]
    met = all(r["met"] for r in result["ratios"].values())
    lines += [
        "",
        f"The noisy tenant parked {result['parked_jobs']} jobs of {parked['pods_per_job']} pods "
        f"(its `max_pending_jobs` / `max_pending_pods`: {result['parked_jobs']} / "
        f"{result['parked_pods']}; answers {parked['answers']}, the last refused on "
        f"`{parked['refused_with']}`), held {len(result.get('noisy_tokens', [])) or 'the most'} "
        f"live tokens (the next {result['token_cap'].split(':')[0]}). "
        f"{result['nodes']} nodes, a round every {result['interval_s']} s, "
        f"{result['samples']} samples of each operation per phase, {result['database']}; run "
        f"{result['run_at']} in {result['seconds']} s. Target (within 2x of the quiet figures, "
        f"median and p95): **{'met' if met else 'not met'}**.",
        "",
        end,
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("main", "rounds", "noisy"), default="main")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--parked-jobs", type=int, default=500)
    parser.add_argument("--parked-pods", type=int, default=4000)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between rounds")
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--no-compare", dest="compare", action="store_false")
    parser.add_argument("--markdown", action="store_true", help="rewrite docs/reliability.md")
    parser.add_argument("--docs", default=str(DOCS))
    parser.add_argument("--json", dest="json_path")
    # the other processes' arguments
    parser.add_argument("--cluster", type=int, default=0)
    parser.add_argument("--tokens", default="")
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--stop", default="")
    parser.add_argument("--no-backoff", dest="backoff", action="store_false")
    parser.add_argument("--var-dir", default="")
    args = parser.parse_args(argv)

    if args.role != "main":
        setup_django()
        if args.role == "rounds":
            rounds_loop(args.cluster, args.interval, args.backoff)
        else:
            no_round_requests()
            noisy_loop(args.tokens.split(","), args.seconds, args.stop)
        return 0

    var_dir = args.var_dir or tempfile.mkdtemp(prefix="tenant-isolation-")
    environment(var_dir)
    progress(f"settings: var dir {var_dir}; migrating")
    setup_django(migrate=True)
    result = run(args)
    write_json(args.json_path, result)
    if args.markdown:
        docs = Path(args.docs)
        docs.write_text(rewrite_between(docs.read_text(), markdown(result)))
        progress(f"wrote {docs}")
    print(json.dumps(result["ratios"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
