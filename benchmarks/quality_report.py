"""Writes the "Placement quality" section of docs/benchmarks.md from the quality benchmarks' JSON.

    python -m benchmarks.quality_report [--results benchmarks/results] [--docs docs/benchmarks.md]

Reads `quality_topology.json` (benchmarks.topology_quality), `quality_optimum.json`
(benchmarks.optimum) and `quality_e2e.json` (benchmarks.e2e_scale), whichever exist, and replaces
only the text between the "## Placement quality" heading and the next heading.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import e2e_scale, optimum, topology_quality
from benchmarks.common import DOCS, ROOT, rewrite_section

SECTION = "## Placement quality"
RESULTS = ROOT / "benchmarks" / "results"


WHY_MISSED = [
    "Why the targets are missed (engine code as of this run; changes proposed to the engine "
    "owner, the reference profile stays available):",
    "",
    "- Admitted GPUs: inside the chosen domain `scheduler.placement.place` orders nodes by their "
    "own offer slots, most first, so pods smaller than a node go to the emptiest nodes (worst "
    "fit) and half-used nodes are left that 8-GPU pods cannot use. A best-fit node order (fewest "
    "slots first at the node level, ancestors still most-slots first) measured on a patched "
    "copy lowered the mean gap from about 10% to 7.0% on the same instances. The rest is the "
    "one-pass queue: jobs are placed in priority/FIFO order and never revisited, while the "
    "optimum chooses which gangs to admit. Best fit plus largest-first order among jobs of "
    "equal priority (emulated through submission order) brought the mean gap to 2.9% (max "
    "11.1%, 10 of 20 cases within 2%): a packing order trades FIFO fairness for admitted GPUs, "
    "so it belongs behind a profile option, not in the reference profile.",
    "- Victim choice: the PostFilter dry run releases every eligible victim at once and plans "
    "in the first `candidateLimit` (6) domains by offer slots; the engine also plans on each "
    "domain's nodes of least victim cost, but that cost is per node, so a victim job spanning "
    "many nodes is counted on each of them and cheap-per-node but many-job plans win (the "
    "outliers are unconstrained preemptors of 14-15 pods). Measured on a patched copy over the "
    "same 20 instances: an extra plan per domain built by lowest priority band first and, "
    "inside the band, a greedy cover taking the node that needs the fewest victim jobs not "
    "chosen yet (a spanning victim is paid once), with `candidateLimit` 16, gave 0 priority "
    "misses and a victim-job ratio of 1.12 mean / 2.0 max, meeting the targets (1.2 / 2), at "
    "about 24 ms a search.",
]

E2E_NOTES = [
    "The target (database and enact path below the engine's own time) is missed by a wide "
    "margin: the engine alone places 1,700-1,900 pods/s, above the kube-scheduler CI floor "
    "(680-810 pods/s at 5,000 nodes) and YuniKorn (204-833 pods/s), but end to end the round "
    "runs at about 100 pods/s because sync, snapshot, record and enact take 17-20x the engine. "
    "Hot spots from `--cprofile` (SQL statements timed per shape; in the JSON under "
    "`cprofile`):",
    "",
    "- `koordweb/services/pods.py` `pod_bind_record`: one `UPDATE koordweb_pod` per bound pod "
    "(4,952 statements at 5,000 nodes) plus per-pod model saves; a `bulk_update` of the bound "
    "pods (node, nominated_node, bound_at, annotations) in batches makes it a few statements.",
    "- `job_refresh_states` (called by enact and by the simulated sync): one `UPDATE "
    "koordweb_job` per job whose state changed (809 in the first round, again 809 in the "
    "second round's sync when the pods start); collect the changed jobs and `bulk_update` them.",
    "- `koordweb/services/records.py` decisions: for every placed job a dict comprehension "
    "scans every placement (jobs x pods, 1.3 s own time at 5,000 nodes); group placements by "
    "job once before the loop.",
    "- `koordweb/snapshot.py` `build` (5.2 s at 5,000 nodes, almost all ORM): 23k model "
    'instances and 140k JSON decodes. The pods query `select_related("node", '
    '"nominated_node")` loads a full Node (six JSON columns) per pod only to read its name: '
    "map `node_id` to the name from the nodes already loaded; defer the JSON columns the "
    "engine never reads (`capacity`, `conditions`, pod `limits`); read metrics and devices "
    "once grouped by node instead of `node.metrics.all()` / `node.devices.all()` per node "
    "(10k queryset clones); skip `parse_required_affinity` for an empty affinity.",
]


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def topology_part(report: dict[str, Any]) -> list[str]:
    loads = sorted({r["load"] for r in report["runs"]})
    return [
        "### Gang locality over time (real and synthetic trees)",
        "",
        f"`python -m benchmarks.topology_quality --ticks {report['ticks']} "
        "--json benchmarks/results/quality_topology.json --markdown`: "
        f"{report['ticks']} one-minute rounds at offered loads "
        f"{', '.join(f'{x:.0%}' for x in loads)}; gangs of 1-64 pods x 8 GPUs (a third "
        "MustGather Block, capped to the largest block; a third PreferGather Spine; a third "
        "without a rule), exponential durations (mean 30 min). Lingjun: SpineLayer = aggregation "
        "switch (3), BlockLayer = ToR (119 racks of 2-8 hosts), 847 nodes. Synthetic "
        "4 x 8 x 8 x 2: SpineLayer 4 > BlockLayer 8 a spine (16 nodes) > RackLayer 8 a block "
        "> 2 nodes, 512 "
        "nodes. `extensions` = parentFragmentation + preferGatherScore; `topology-blind` = the "
        "default profile with every rule stripped. Measured after a 60-tick warm-up. Span: height "
        "of a gang's lowest common domain (0 node; lingjun 1 block, 2 spine, 3 cluster; synthetic "
        "1 rack, 2 block, 3 spine, 4 cluster). Stranded: idle GPUs in blocks with fewer free nodes "
        "than the median gang has pods.",
        "",
        topology_quality.markdown(report).rstrip("\n"),
        "",
        "Topology rules roughly double the share of gangs kept in one block over the "
        "topology-blind baseline and lower the span, at the price of waiting: a MustGather gang "
        "waits for a whole block (p99 wait up to about an hour at 75-100% load, against minutes "
        "without rules). `parentFragmentation` strands fewer GPUs on the Lingjun racks. "
        "Allocation at 100% offered load (94% on Lingjun) sits near FGD's 95.23% anchor, but "
        "FGD's figure is for GPU-sharing pods on the openb trace, not whole-node gangs.",
    ]


def optimum_part(report: dict[str, Any]) -> list[str]:
    s = report["summary"]
    return [
        "### Against the exact optimum (CP-SAT)",
        "",
        f"`python -m benchmarks.optimum --instances {s['placement_cases'] // 2} --time-limit "
        f"{report['time_limit_s']:g} --json benchmarks/results/quality_optimum.json --markdown` "
        f"(OR-Tools, the `bench` extra): cuts of at most {report['max_nodes']} nodes of both "
        "trees. Placement: nodes partly busy, a queue asking for 1.3-2x the free GPUs (pods of "
        "2/4/8 GPUs), one engine round against the model that maximises admitted GPUs "
        "(all-or-nothing gangs, MustGather in one block, node capacities). Victims: every GPU "
        "busy with jobs of priority 1-1000, one preemptor gang, against the lexicographic "
        "optimum (lowest highest-victim priority, then fewest victim jobs).",
        "",
        optimum.markdown(report).rstrip("\n"),
        "",
        "Diagnostics: handed only the gangs the optimum admits, the engine places all of them in "
        f"{s['placement_optimal_set_placed_whole']} of {s['placement_cases']} cases, so the gap "
        "is not only which gangs are admitted but how they are packed. With victims offered in "
        "priority bands (lowest band first; emulated from outside the engine by running the "
        "preemptor just above each band) the highest-victim-priority misses drop to "
        f"{s['victim_banded_lexicographic_misses']} and the victim-job ratio is "
        f"{s['victim_banded_ratio_mean']} mean / {s['victim_banded_ratio_max']} max.",
        "",
        *WHY_MISSED,
    ]


def e2e_part(report: dict[str, Any]) -> list[str]:
    sizes = ",".join(str(r["nodes"]) for r in report["runs"])
    return [
        "### End to end through Celery and the database",
        "",
        "`DATABASE_URL=postgres://postgres@127.0.0.1:5432/koordweb_bench "
        "CELERY_BROKER_URL=redis://127.0.0.1:6379/0 KOORDWEB_ROUND_SOFT_LIMIT=900 "
        f"python -m benchmarks.e2e_scale --nodes {sizes} --rounds {report['rounds_per_size']} "
        "--cprofile --json benchmarks/results/quality_e2e.json --markdown` "
        f"(database {report['runs'][0]['database'] if report['runs'] else '?'}, broker "
        f"{report['broker']}, one `celery worker --pool solo` subprocess): nodes of 8 GPUs, half "
        "busy; pending 4-GPU pods that exactly fill the idle half; the first round binds them, "
        "the second is the steady state. Times summed over the rounds; wall includes queueing.",
        "",
        e2e_scale.markdown(report).rstrip("\n"),
        "",
        *E2E_NOTES,
    ]


def section(results: Path) -> str:
    parts: list[str] = [
        "<!-- section: topology_quality; written by benchmarks/quality_report.py -->"
    ]
    for name, render in (
        ("quality_topology.json", topology_part),
        ("quality_optimum.json", optimum_part),
        ("quality_e2e.json", e2e_part),
    ):
        report = _load(results / name)
        if report is not None:
            parts += ["", *render(report)]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--docs", default=str(DOCS))
    args = parser.parse_args(argv)
    docs = Path(args.docs)
    docs.write_text(rewrite_section(docs.read_text(), SECTION, section(Path(args.results))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
