"""GPU-sharing trace replay benchmark: policies x openb traces x seeds, beside the FGD paper.

    .venv/bin/python benchmarks/replay.py [--traces default,gpushare100,gpuspec33,multigpu50]
        [--policies fgd,default,LeastAllocated,MostAllocated,Random] [--seeds 42,...,51]

Runs `manage.py replay_trace` once per (trace, policy), writes benchmarks/results/replay.json (a
list of the command's summaries) and prints the markdown tables of docs/benchmarks.md, with the
paper's medians from the authors' expected results (analysis_allo_discrete.csv) alongside.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "fgd-atc23-expected-results"
    / "analysis_allo_discrete.csv"
)
PAPER_POLICIES = {
    "06-FGD": "FGD",
    "05-BestFit": "BestFit",
    "04-GpuPacking": "GpuPacking",
    "03-GpuClustering": "GpuClustering",
    "02-DotProd": "DotProd",
    "01-Random": "Random",
}


def paper_results(traces: list[str]) -> dict[tuple[str, str, int], list[float]]:
    """(paper policy, trace, load) -> values over seeds, from the authors' cached results."""
    out: dict[tuple[str, str, int], list[float]] = {}
    if not EXPECTED.is_file():
        return out
    with EXPECTED.open() as handle:
        for row in csv.DictReader(handle):
            trace = row["workload"].removeprefix("openb_pod_list_")
            if trace in traces and row["sc_policy"] in PAPER_POLICIES:
                for load in (100, 130):
                    key = (PAPER_POLICIES[row["sc_policy"]], trace, load)
                    out.setdefault(key, []).append(float(row[str(load)]))
    return out


def cell(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def policy_rows(
    runs: list[dict],
    traces: list[str],
    policies: list[str],
    label: Callable[[str], str],
    cell_of: Callable[[list[dict]], str],
) -> list[str]:
    """A table of a row a policy and a column a trace, each cell from that pair's runs."""
    lines = ["| policy | " + " | ".join(traces) + " |", "|---|" + "---|" * len(traces)]
    for policy in policies:
        row = [label(policy)]
        for trace in traces:
            row.append(cell_of([r for r in runs if r["trace"] == trace and r["policy"] == policy]))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def allocation_cell(found: list[dict], load: int) -> str:
    """The allocation at `load`% over every seed of `found` runs."""
    return cell([v for r in found for v in r[f"alloc_at_{load}"] if v is not None])


def tables(runs: list[dict], traces: list[str], policies: list[str]) -> str:
    paper = paper_results(traces)
    lines: list[str] = []
    for load in (100, 130):
        lines.append(
            f"GPU allocation % at {load}% arrived GPU load: median (min-max) of the seeds."
        )
        lines.append("")
        lines += policy_rows(
            runs,
            traces,
            policies,
            lambda policy: f"koordweb `{policy}`",
            partial(allocation_cell, load=load),
        )
        for name in ("FGD", "BestFit", "GpuPacking", "Random"):
            row = [f"paper {name}"] + [cell(paper.get((name, t, load), [])) for t in traces]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines.append(
        "Replay rate, pods per second (wall clock / per CPU second of the replay process):"
    )
    lines.append("")
    lines += policy_rows(
        runs,
        traces,
        policies,
        lambda policy: f"`{policy}`",
        lambda found: (
            " / ".join(f"{r['pods_per_s']:.0f} / {r['pods_per_cpu_s']:.0f}" for r in found) or "n/a"
        ),
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="default,gpushare100,gpuspec33,multigpu50")
    parser.add_argument("--policies", default="fgd,default,LeastAllocated,MostAllocated,Random")
    parser.add_argument("--seeds", default="42,43,44,45,46,47,48,49,50,51")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "replay.json"))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koordweb.settings.local")
    import django
    from django.core.management import call_command

    django.setup()
    traces, policies = args.traces.split(","), args.policies.split(",")
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for trace in traces:
            for policy in policies:
                out = Path(tmp) / f"{trace}-{policy}.json"
                call_command(
                    "replay_trace",
                    "--trace",
                    trace,
                    "--policy",
                    policy,
                    "--seeds",
                    args.seeds,
                    "--json",
                    str(out),
                )
                runs.append(json.loads(out.read_text()))
                Path(args.out).write_text(json.dumps(runs, indent=1) + "\n")  # keep partial work
    print(tables(runs, traces, policies))


if __name__ == "__main__":
    main()
