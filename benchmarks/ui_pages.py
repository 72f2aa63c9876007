"""Page times at 1,000 nodes (issue #37): every page's server time, queries and size, as an admin
and as a tenant.

    python -m benchmarks.ui_pages [--nodes 1000] [--repeat 5] [--minutes 30] [--markdown]
        [--json FILE] [--profile LABEL]

The cluster is the one `tests/koordweb/ui/test_walk.py` walks (`benchmarks.e2e_scale.
build_cluster`: 8-GPU nodes in blocks of 16 and spines of 8 blocks, half busy with a priority-10
pod each, pending gangs of 4-GPU pods), with 90% of `--nodes` as those GPU nodes, and on top of it:
H800 cards as Device rows on every GPU node (the busy pods hold theirs whole), 5% Ascend NPU and 5%
Cambricon MLU nodes in a spine of their own with NPU and MLU jobs waiting, quotas (`batch`,
`train`, `accel`) with a tenant who is a member of two, the demo's priority classes, and then
`--minutes` simulated minutes ending now, each as the beat runs them: a round of the simulated
backend (`engine.pipeline.round_execute`), the simulated koordlet's NodeMetric reports and the
GPU sample ingest (`services.gpu_usage.gpu_samples_ingest`; the reports also carry each pod's
own use, as koordlet's do). Three waves of production-priority gangs arrive on a full cluster
(minutes 4, 12 and 20), so the rounds preempt; a `train` gang wider than any block waits for
good; every 25th node reports 80% CPU before the last round, so the load-aware filter refuses it.

Every page (overview, topology, devices and nodes with filters, the jobs table with filters and
sorts, a running, a pending and a preempted job, quotas and a quota's edit form, preemptions and
one, rounds and one, GPU efficiency, the submit form and a what-if, tokens, import, the API docs
and the API's list endpoints) is requested `--repeat` times as the admin and as the tenant
(admin-only pages as the admin only) through Django's test client, in this process: middleware,
session, views, templates. Per page: server time median / p95 / max, the database queries of one
request (`CaptureQueriesContext`) and the response size. A page over 1 s is flagged.

SQLite in a private directory by default (`KOORDWEB_VAR_DIR`); a DATABASE_URL is used as given
(the cluster is named `ui-pages` and replaced). `--markdown` rewrites the section of docs/ui.md
between its markers; `--profile LABEL` prints cProfile's heaviest functions of that page;
`--reuse` times the cluster an earlier run left in `--var-dir` instead of building one.
Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import percentile, write_json
from benchmarks.ui_pages_world import BLOCK, World, build_world, load_world, progress

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "ui.md"
BEGIN = "<!-- section: ui_pages; written by benchmarks/ui_pages.py -->"
END = "<!-- end section: ui_pages -->"
LIMIT_S = 1.0
ADMINS = "admins only"
CARD_WORDS = {"nvidia": "NVIDIA H800 GPUs", "huawei": "Ascend NPUs", "cambricon": "Cambricon MLUs"}
# The pages' static files from their source folders (the production settings want
# collectstatic's manifest), DEBUG off.
SETTINGS = "koordweb.settings.local"


def environment(var_dir: str) -> None:
    """Settings of the run: its own var directory (SQLite database, cache, broker files) unless
    DATABASE_URL names the database."""
    os.environ["KOORDWEB_VAR_DIR"] = var_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS)
    os.environ.setdefault("DEBUG", "false")  # as served: no query log, no debug pages
    os.environ.setdefault("SECRET_KEY", "ui-pages-benchmark-" + "k" * 40)
    os.environ.setdefault("KOORDWEB_HTTPS", "false")  # the test client speaks plain HTTP
    os.environ.setdefault("KOORDWEB_WARM_SNAPSHOT", "true")


def setup_django(migrate: bool = False) -> None:
    import logging
    import warnings

    import django

    django.setup()
    # whitenoise looks for STATIC_ROOT, which only collectstatic creates (pyproject does the same)
    warnings.filterwarnings("ignore", "No directory at", UserWarning)
    logging.getLogger("django.request").setLevel(logging.ERROR)  # the tenant's expected 403s
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


# The pages ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    label: str
    url: str
    form: dict[str, Any] | None = None  # POSTed when given
    not_for_tenant: str = ""  # why the tenant does not request it (its row says so)


def pages(cluster: Any) -> list[Page]:
    """Every page and the API's list endpoints, with the filters and details worth timing."""
    from django.db.models import Count
    from django.urls import reverse

    from koordweb.models import Job, JobState, Preemption, Round

    jobs = Job.objects.filter(cluster=cluster)

    def job_of(**filters: Any) -> int:
        pk = jobs.filter(**filters).order_by("-total_number", "pk").values_list("pk", flat=True)
        return pk.first() or 0

    # The tenant's team's jobs where there is one, so both roles time the same page.
    running = job_of(state=JobState.RUNNING, namespace="train")
    pending = job_of(state=JobState.PENDING, namespace="train") or job_of(state=JobState.PENDING)
    preempted = job_of(state=JobState.PREEMPTED, namespace="train") or job_of(
        state=JobState.PREEMPTED
    )
    npu = job_of(state=JobState.RUNNING, namespace="accel")
    rounds = Round.objects.filter(cluster=cluster)
    busiest = (
        rounds.annotate(evictions=Count("preemptions"))
        .order_by("-evictions", "-pk")
        .values_list("pk", flat=True)
        .first()
    )
    latest = rounds.order_by("-pk").values_list("pk", flat=True).first()
    preemption = (
        Preemption.objects.filter(cluster=cluster)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    block = cluster.nodes.order_by("name").values_list("labels", flat=True).first()[BLOCK]
    api = f"?cluster={cluster.name}"
    whatif = {
        "name": "what-if-probe",
        "namespace": "train",
        "quota": "train",
        "priority_class": "koord-prod",
        "replicas": 2,
        "device": "gpu",
        "gpus": 8,
        "cpu": 16,
        "memory": 128,
        "action": "what-if",
    }
    found = [
        Page("overview", reverse("overview")),
        Page("overview (live part)", reverse("overview-live")),
        Page("topology", reverse("topology")),
        Page("topology, a job outlined", f"{reverse('topology')}?job={running}"),
        Page("devices", reverse("devices")),
        Page("devices, utilisation", f"{reverse('devices')}?view=utilisation"),
        Page("devices, allocated but idle", f"{reverse('devices')}?view=idle"),
        Page("devices, NPUs", f"{reverse('devices')}?vendor=huawei"),
        Page("devices, one block", f"{reverse('devices')}?block={block}"),
        Page("devices, page 5", f"{reverse('devices')}?page=5"),
        Page("nodes", reverse("nodes")),
        Page("nodes, above a threshold", f"{reverse('nodes')}?state=busy"),
        Page("nodes, MLUs", f"{reverse('nodes')}?device=mlu"),
        Page("nodes, one block, page 2", f"{reverse('nodes')}?domain={block}&page=2"),
        Page("jobs", reverse("jobs")),
        Page("jobs, waiting", f"{reverse('jobs')}?state=pending"),
        Page("jobs, all by wait", f"{reverse('jobs')}?state=all&sort=-wait"),
        Page("jobs, team and GPUs by cards", f"{reverse('jobs')}?team=train&device=gpu&sort=-gpus"),
        Page("jobs, name search", f"{reverse('jobs')}?state=all&q=gang-0001"),
        Page("jobs, all, page 10", f"{reverse('jobs')}?state=all&page=10"),
        Page("job: running gang", reverse("job-detail", args=[running])),
        Page(
            "job: running NPU job",
            reverse("job-detail", args=[npu]),
            not_for_tenant="another team's job",
        ),
        Page("job: pending", reverse("job-detail", args=[pending])),
        Page("job: preempted", reverse("job-detail", args=[preempted])),
        Page("quotas", reverse("quotas")),
        Page("quota edit", reverse("quota-edit", args=["train"]), not_for_tenant=ADMINS),
        Page("preemptions", reverse("preemptions")),
        Page("preemptions, page 2", f"{reverse('preemptions')}?page=2"),
        Page("preemption", reverse("preemption-detail", args=[preemption])),
        Page("rounds", reverse("rounds")),
        Page("round: latest", reverse("round-detail", args=[latest])),
        Page("round: most preemptions", reverse("round-detail", args=[busiest])),
        Page("efficiency", reverse("efficiency")),
        Page("efficiency, 7 days by unused", f"{reverse('efficiency')}?window=7d&rank=unused"),
        Page("submit form", reverse("job-submit")),
        Page("what-if", reverse("job-submit"), form=whatif),
        Page("tokens", reverse("tokens")),
        Page("import", reverse("import"), not_for_tenant=ADMINS),
        Page("API docs", reverse("api-docs")),
        Page("API: jobs", f"/api/v1/jobs/{api}"),
        Page("API: jobs waiting", f"/api/v1/jobs/{api}&state=pending"),
        Page("API: job usage", f"/api/v1/jobs/{running}/usage/"),
        Page("API: nodes", f"/api/v1/nodes/{api}"),
        Page("API: devices", f"/api/v1/devices/{api}"),
        Page("API: quotas", f"/api/v1/quotas/{api}"),
        Page("API: rounds", f"/api/v1/rounds/{api}"),
        Page("API: preemptions", f"/api/v1/preemptions/{api}"),
        Page("API: topology", f"/api/v1/topology/{api}"),
        Page("API: GPU efficiency", f"/api/v1/gpu/efficiency/{api}"),
        Page("API: priority classes", f"/api/v1/priority-classes/{api}"),
    ]
    return found


@dataclass
class Timing:
    label: str
    role: str
    status: int
    times_ms: list[float]
    cpu_ms: list[float]  # this process's CPU time: the part other processes' load cannot stretch
    queries: int
    size_bytes: int

    def row(self) -> dict[str, Any]:
        return {
            "page": self.label,
            "role": self.role,
            "status": self.status,
            "median_ms": round(statistics.median(self.times_ms), 1),
            "p95_ms": round(percentile(self.times_ms, 95), 1),
            "max_ms": round(max(self.times_ms), 1),
            "cpu_median_ms": round(statistics.median(self.cpu_ms), 1),
            "queries": self.queries,
            "kb": round(self.size_bytes / 1024, 1),
        }


def client_for(user: Any, cluster: Any) -> Any:
    """A logged-in test client whose session has chosen `cluster`."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    client.get(f"/?cluster={cluster.name}")
    return client


def request(client: Any, page: Page) -> Any:
    if page.form is not None:
        return client.post(page.url, page.form)
    return client.get(page.url)


def measure(client: Any, page: Page, *, role: str, repeat: int) -> Timing:
    """`repeat` timed requests, then one more with its queries counted."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times, cpu = [], []
    for _ in range(repeat):
        begun, begun_cpu = time.perf_counter(), time.process_time()
        request(client, page)
        times.append((time.perf_counter() - begun) * 1000)
        cpu.append((time.process_time() - begun_cpu) * 1000)
    with CaptureQueriesContext(connection) as queries:
        response = request(client, page)
    return Timing(
        page.label, role, response.status_code, times, cpu, len(queries), len(response.content)
    )


def reports_refresh(cluster: Any) -> None:
    """The nodes' latest usage reports made current (outside the timed part): the world was built
    minutes ago, and a report older than LoadAware's 180 s expires, which refuses every node."""
    from django.utils import timezone

    from koordweb.models import NodeMetric, latest_node_metric_ids

    latest = latest_node_metric_ids(NodeMetric.objects.filter(node__cluster=cluster))
    NodeMetric.objects.filter(id__in=latest).update(reported_at=timezone.now())


def measure_all(world: World, *, repeat: int) -> list[Timing]:
    found = pages(world.cluster)
    results = []
    for role, user in (("admin", world.admin), ("tenant", world.tenant)):
        client = client_for(user, world.cluster)
        for page in found:
            if page.not_for_tenant and role == "tenant":
                continue
            reports_refresh(world.cluster)
            timing = measure(client, page, role=role, repeat=repeat)
            flag = " OVER 1 s" if statistics.median(timing.times_ms) > LIMIT_S * 1000 else ""
            progress(
                f"{role:6} {page.label:32} {timing.status} median "
                f"{statistics.median(timing.times_ms):7.1f} ms, {timing.queries} queries, "
                f"{timing.size_bytes / 1024:.0f} kB{flag}"
            )
            results.append(timing)
    return results


def profile(world: World, label: str, *, top: int = 25) -> str:
    """cProfile's heaviest functions (cumulative) of one admin request of the page `label`."""
    page = next(p for p in pages(world.cluster) if p.label == label)
    client = client_for(world.admin, world.cluster)
    request(client, page)
    profiler = cProfile.Profile()
    profiler.enable()
    request(client, page)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# Report -------------------------------------------------------------------------------------


def summary(
    world: World, timings: list[Timing], load: tuple[float, float] = (0.0, 0.0)
) -> dict[str, Any]:
    """The run's figures; `load` is the machine's load average before and after measuring."""
    from django.conf import settings
    from django.db.models import Count

    from koordweb.models import CardSample, Device, Job, NodeMetric, Preemption, Round

    cluster = world.cluster
    rows = [t.row() for t in timings]
    limit = LIMIT_S * 1000
    over = [r for r in rows if r["p95_ms"] > limit or r["median_ms"] > limit]
    over_cpu = [r for r in rows if r["cpu_median_ms"] > limit]
    return {
        "nodes": cluster.nodes.count(),
        "cards": dict(
            Device.objects.filter(node__cluster=cluster)
            .values_list("vendor")
            .annotate(n=Count("id"))
        ),
        "jobs": Job.objects.filter(cluster=cluster).count(),
        "rounds": Round.objects.filter(cluster=cluster).count(),
        "preemptions": Preemption.objects.filter(cluster=cluster).count(),
        "node_metrics": NodeMetric.objects.filter(node__cluster=cluster).count(),
        "card_samples": CardSample.objects.count(),
        "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
        "timings": world.timings,
        "pages": rows,
        "over_limit": [f"{r['role']}: {r['page']}" for r in over],
        "over_limit_cpu": [f"{r['role']}: {r['page']}" for r in over_cpu],
        "load_average": [round(v, 1) for v in load],
        "cores": os.cpu_count(),
        "not_for_tenant": {p.label: p.not_for_tenant for p in pages(cluster) if p.not_for_tenant},
        "run_at": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
    }


def markdown(result: dict[str, Any], repeat: int) -> str:
    """The section of docs/ui.md, between its markers."""
    by_page: dict[str, dict[str, dict[str, Any]]] = {}
    for row in result["pages"]:
        by_page.setdefault(row["page"], {})[row["role"]] = row

    def cell(row: dict[str, Any] | None, label: str) -> str:
        if row is None:
            return f"{result['not_for_tenant'].get(label, 'not requested')} | | |"
        over = max(row["median_ms"], row["p95_ms"]) > LIMIT_S * 1000
        times = f"{row['median_ms']:,.0f} / {row['p95_ms']:,.0f} / {row['max_ms']:,.0f}"
        cpu = f"{row['cpu_median_ms']:,.0f}"
        status = "" if row["status"] == 200 else f" (answer {row['status']})"
        return (
            f"{'**' + times + '**' if over else times}{status} | "
            f"{'**' + cpu + '**' if row['cpu_median_ms'] > LIMIT_S * 1000 else cpu} | "
            f"{row['queries']} | {row['kb']:,.0f}"
        )

    load = result["load_average"]
    cards = ", ".join(
        f"{n:,} {CARD_WORDS.get(vendor, vendor + ' cards')}"
        for vendor, n in sorted(result["cards"].items())
    )
    lines = [
        BEGIN,
        "",
        f"Server time of every page on a generated cluster of {result['nodes']:,} nodes ({cards}), "
        f"{result['jobs']:,} jobs, {result['rounds']} rounds, {result['preemptions']} "
        f"preemptions, {result['node_metrics']:,} node reports and {result['card_samples']:,} "
        f"card samples (`benchmarks/ui_pages.py`: the cluster `tests/koordweb/ui/test_walk.py` "
        f"walks, with NPUs, MLUs, quotas, GPU usage history and real rounds on top). Each page "
        f"is requested {repeat} times per role through Django's test client (middleware, "
        "session, view, template; no network), times in ms as median / p95 / max, and the "
        "median CPU time of the serving process (what the page takes on an idle machine: "
        f"the machine is shared, its load average was {load[0]} before measuring and {load[1]} "
        f"after, on {result['cores']} cores); queries and size are of one request. "
        f"{result['database']}, run {result['run_at']}.",
        "",
        "| page | admin ms | CPU ms | queries | kB | tenant ms | CPU ms | queries | kB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, roles in by_page.items():
        admin, tenant = cell(roles.get("admin"), label), cell(roles.get("tenant"), label)
        lines.append(f"| {label} | {admin} | {tenant} |")
    lines += [
        "",
        "Every page under 1 s, median and p95 of the server time, both roles: "
        f"{_verdict(result['over_limit'])}. By the serving process's CPU time: "
        f"{_verdict(result['over_limit_cpu'])}.",
        "",
        END,
    ]
    return "\n".join(lines)


def _verdict(over: list[str]) -> str:
    return "**met**" if not over else "**not met** (" + "; ".join(over) + ")"


def rewrite_between(text: str, section: str) -> str:
    """`section` (markers included) in place of the one in `text`, or appended."""
    return common.rewrite_between(text, section, heading="## Page times at 1,000 nodes")


def run(args: argparse.Namespace, report: Callable[[str], None] = progress) -> dict[str, Any]:
    world = load_world() if args.reuse else None
    if world is None:
        world = build_world(nodes=args.nodes, minutes=args.minutes)
    else:
        progress(f"reusing the cluster of an earlier run: {world.cluster.nodes.count()} nodes")
    before = os.getloadavg()[0]
    timings = measure_all(world, repeat=args.repeat)
    result = summary(world, timings, (before, os.getloadavg()[0]))
    if args.profile:
        report(profile(world, args.profile))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--minutes", type=int, default=30, help="simulated minutes of rounds")
    parser.add_argument("--markdown", action="store_true", help="rewrite docs/ui.md")
    parser.add_argument("--docs", default=str(DOCS))
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--profile", default="", help="a page's label to profile")
    parser.add_argument("--var-dir", default="", help="default: a new temporary directory")
    parser.add_argument(
        "--reuse", action="store_true", help="time the cluster an earlier run left in --var-dir"
    )
    args = parser.parse_args(argv)

    var_dir = args.var_dir or tempfile.mkdtemp(prefix="ui-pages-")
    Path(var_dir).mkdir(parents=True, exist_ok=True)
    environment(var_dir)
    progress(f"settings: var dir {var_dir}; migrating")
    setup_django(migrate=True)
    result = run(args)
    write_json(args.json_path, result)
    if args.markdown:
        docs = Path(args.docs)
        docs.write_text(rewrite_between(docs.read_text(), markdown(result, args.repeat)))
        progress(f"wrote {docs}")
    print(json.dumps({"over_limit": result["over_limit"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
