"""`python manage.py replay_trace`: replay an Alibaba openb GPU trace (FGD ATC'23 protocol).

Thin: parse the arguments, read the CSVs, call `scheduler.fgd.replay` once per seed, show progress
with tqdm on stderr, print one summary line and write the JSON / CSV asked for.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from scheduler.api import POLICY_NAMES, REPORTED_LOADS, TraceError, parse_nodes, parse_pods, replay

# The shared data folder beside the checkout (../shared/data), as the project lays it out.
DEFAULT_TRACE_DIR = str(
    Path(settings.BASE_DIR).parent / "shared" / "data" / "alibaba-gpu-v2023" / "csv"
)
NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_{trace}.csv"
DEFAULT_SEEDS = "42,43,44,45,46,47,48,49,50,51"


def available_traces(trace_dir: Path) -> list[str]:
    """Trace names found in the folder (`default`, `gpushare100`, `multigpu50`, ...)."""
    prefix, suffix = POD_FILE.split("{trace}")
    return sorted(p.name[len(prefix) : -len(suffix)] for p in trace_dir.glob(f"{prefix}*{suffix}"))


def parse_seeds(raw: str) -> list[int]:
    try:
        seeds = [int(s) for s in raw.split(",") if s.strip()]
    except ValueError as exc:
        message = f"--seeds must be comma-separated integers, got {raw!r}"
        raise CommandError(message, returncode=2) from exc
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise CommandError(
            f"--seeds needs distinct non-negative integers, got {raw!r}", returncode=2
        )
    return seeds


def read_rows(path: Path) -> list[dict[str, str | None]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


class Command(BaseCommand):
    help = "Replay an openb GPU trace under a placement policy and report GPU allocation ratios."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--trace", default="default", help="trace name (file suffix)")
        parser.add_argument("--policy", default="fgd", help=f"one of {', '.join(POLICY_NAMES)}")
        parser.add_argument("--seeds", default=DEFAULT_SEEDS, help="comma-separated seeds")
        parser.add_argument("--trace-dir", default=None, help="folder of the openb CSV files")
        parser.add_argument("--json", default=None, help="write the summary JSON here")
        parser.add_argument("--csv", default=None, help="write one row per seed here")
        parser.add_argument("--tune-ratio", type=float, default=1.3, help="arrived GPU load cap")

    def handle(self, *args: Any, **options: Any) -> None:
        trace_dir = Path(
            options["trace_dir"] or os.environ.get("KOORDWEB_TRACE_DIR") or DEFAULT_TRACE_DIR
        )
        if not (trace_dir / NODE_FILE).is_file():
            raise CommandError(f"no {NODE_FILE} in {trace_dir}", returncode=2)
        trace = options["trace"]
        traces = available_traces(trace_dir)
        if trace not in traces:
            raise CommandError(
                f"unknown trace {trace!r} (available: {', '.join(traces)})", returncode=2
            )
        policy = options["policy"]
        if policy not in POLICY_NAMES:
            raise CommandError(
                f"unknown policy {policy!r} (choose from {', '.join(POLICY_NAMES)})", returncode=2
            )
        seeds = parse_seeds(options["seeds"])
        tune_ratio = options["tune_ratio"]
        if not 1.0 <= tune_ratio <= 3.0:
            raise CommandError(f"--tune-ratio must be in 1.0..3.0, got {tune_ratio}", returncode=2)
        try:
            cluster = parse_nodes(read_rows(trace_dir / NODE_FILE))
            pods = parse_pods(read_rows(trace_dir / POD_FILE.format(trace=trace)), cluster.models)
        except TraceError as exc:
            raise CommandError(f"bad trace: {exc}", returncode=2) from exc

        summary = self._run(trace, policy, seeds, cluster, pods, tune_ratio)
        reached = [v for v in summary["alloc_at_100"] if v is not None]
        median = f"{statistics.median(reached):.2f}%" if reached else "not reached"
        line = (
            f"{trace} {policy}: GPU allocation at 100% arrived load, median {median} over "
            f"{len(seeds)} seeds; {summary['pods_per_s']:.0f} pods/s"
        )
        self.stdout.write(line)
        if options["json"]:
            Path(options["json"]).write_text(json.dumps(summary, indent=2) + "\n")
        if options["csv"]:
            self._write_csv(Path(options["csv"]), summary)

    def _run(
        self, trace: str, policy: str, seeds: list[int], cluster: Any, pods: Any, ratio: float
    ) -> dict[str, Any]:
        at: dict[int, list[float | None]] = {load: [] for load in REPORTED_LOADS}
        placed: list[int] = []
        replayed: list[int] = []
        elapsed = cpu = 0.0
        for seed in seeds:
            with tqdm(desc=f"{trace}/{policy}/seed {seed}", unit="pod", leave=False) as bar:
                started, started_cpu = time.perf_counter(), time.process_time()
                result = replay(cluster, pods, policy, seed, ratio, on_pod=lambda _i: bar.update())
                elapsed += time.perf_counter() - started
                cpu += time.process_time() - started_cpu
            for load in REPORTED_LOADS:
                at[load].append(result.allocation_at(load))
            placed.append(result.placed)
            replayed.append(result.pods)
        return {
            "trace": trace,
            "policy": policy,
            "seeds": seeds,
            "alloc_at_100": at[100],
            "alloc_at_130": at[130],
            "pods": replayed,
            "placed": placed,
            "pods_per_s": round(sum(replayed) / elapsed, 1) if elapsed > 0 else None,
            # The reference machine is shared: CPU time says what the replay itself costs.
            "pods_per_cpu_s": round(sum(replayed) / cpu, 1) if cpu > 0 else None,
            "tune_ratio": ratio,
            "nodes": cluster.size,
            "gpus": cluster.total_gpu_milli // 1000,
        }

    def _write_csv(self, path: Path, summary: dict[str, Any]) -> None:
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["trace", "policy", "seed", "alloc_at_100", "alloc_at_130", "pods"])
            for k, seed in enumerate(summary["seeds"]):
                writer.writerow(
                    [
                        summary["trace"],
                        summary["policy"],
                        seed,
                        summary["alloc_at_100"][k],
                        summary["alloc_at_130"][k],
                        summary["pods"][k],
                    ]
                )
