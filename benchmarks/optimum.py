"""The exact optimum beside the engine: CP-SAT models of gang placement and of victim choice.

    python -m benchmarks.optimum [--instances 12] [--nodes 128] [--time-limit 20] [--json FILE]

Needs OR-Tools (the optional `bench` extra). Two families of instances, on cuts of the synthetic
4 x 8 x 8 x 2 tree and of the Lingjun topology (see benchmarks/common.py), at most 128 nodes:

1. Placement: nodes partly busy (whole used GPUs drawn per node), a queue of pending gangs asking
   for 1.3-2x the free GPUs (pods of 2, 4 or 8 GPUs; MustGather Block, PreferGather Spine or no
   rule). The exact model picks which gangs to admit and how many pods of each go on every node,
   all-or-nothing, a MustGather gang inside one block, node GPU capacities, maximising admitted
   GPUs (PreferGather is a preference and does not constrain it). The engine runs one round.
   Gap = (optimum - ours) / optimum; target <= 2%.
2. Victim choice: every node full of running jobs (1-8 pods, multi-node, priorities 1..1000), one
   high-priority preemptor gang (MustGather Block or no rule). The exact model chooses whole victim
   jobs and the preemptor's nodes, lexicographically: lowest highest-victim priority, then fewest
   victim jobs (koordinator.md "Job-level preemption"). The engine's PostFilter gives its choice.
   Ratio = our victim jobs / optimal victim jobs (when the highest victim priority ties; a higher
   one is counted as a lexicographic miss); target mean <= 1.2, max <= 2.

CP-SAT runs on one worker (the machine is shared) with a time limit; a non-optimal status is
reported, and its gap is then measured against the solver's bound (an upper bound of the gap).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model
from tqdm import tqdm

from benchmarks.common import (
    BLOCK,
    GPU,
    GPUS_PER_NODE,
    SPINE,
    Topology,
    core_profile,
    gang_job,
    percentile,
    topology_by_name,
    write_json,
)
from scheduler import ClusterSnapshot, JobInfo, PodInfo, RoundResult, plan_round
from scheduler.profile import Profile

KINDS = ("must-block", "prefer-spine", "none")
SIZES = (1, 2, 3, 4, 6, 8, 12, 16)


@dataclass(frozen=True)
class Gang:
    id: str
    size: int
    gpus: int  # per pod
    kind: str
    priority: int = 0


def topology_cut(topo: Topology, max_nodes: int, rng: random.Random) -> Topology:
    """Whole blocks of one spine (then more spines) until `max_nodes` would be exceeded."""
    by_spine: dict[str, list[str]] = {}
    sizes = topo.block_sizes()
    for n in topo.nodes:
        blocks = by_spine.setdefault(n.labels[SPINE], [])
        if n.labels[BLOCK] not in blocks:
            blocks.append(n.labels[BLOCK])
    spines = sorted(by_spine)
    rng.shuffle(spines)
    chosen: list[str] = []
    total = 0
    for spine in spines:
        blocks = sorted(by_spine[spine])
        rng.shuffle(blocks)
        for block in blocks:
            if total + sizes[block] <= max_nodes:
                chosen.append(block)
                total += sizes[block]
    return topo.cut(chosen)


def _solver(time_limit: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1
    return solver


# --- 1. placement ------------------------------------------------------------------------------
def placement_instance(
    topo: Topology, rng: random.Random, gangs: int
) -> tuple[dict[str, int], list[Gang]]:
    """Free GPUs per node, and a queue asking for 1.3-2x the free GPUs."""
    free = {n.name: GPUS_PER_NODE - rng.choice((0, 0, 0, 0, 2, 4, 8, 8)) for n in topo.nodes}
    target = sum(free.values()) * rng.uniform(1.3, 2.0)
    largest = max(topo.block_sizes().values())
    queue: list[Gang] = []
    while sum(g.size * g.gpus for g in queue) < target and len(queue) < gangs:
        kind = KINDS[len(queue) % 3]
        gpus = rng.choice((8, 8, 8, 4, 2))
        size = rng.choice(SIZES)
        if kind == "must-block":
            size = min(size, largest * (GPUS_PER_NODE // gpus))
        queue.append(Gang(f"q/g{len(queue):03d}", size, gpus, kind))
    return free, queue


def placement_optimum(
    topo: Topology, free: dict[str, int], queue: Sequence[Gang], time_limit: float
) -> dict[str, Any]:
    model = cp_model.CpModel()
    block = topo.block_of()
    blocks = sorted(set(block.values()))
    names = [n.name for n in topo.nodes if free[n.name] > 0]
    admit = [model.new_bool_var(f"x{g}") for g in range(len(queue))]
    count: dict[tuple[int, str], cp_model.IntVar] = {}
    for g, gang in enumerate(queue):
        for n in names:
            cap = min(gang.size, free[n] // gang.gpus)
            if cap > 0:
                count[g, n] = model.new_int_var(0, cap, f"n{g}_{n}")
        model.add(sum(count[g, n] for n in names if (g, n) in count) == gang.size * admit[g])
        if gang.kind == "must-block":
            pick = {b: model.new_bool_var(f"y{g}_{b}") for b in blocks}
            model.add(sum(pick.values()) == admit[g])
            for n in names:
                if (g, n) in count:
                    model.add(count[g, n] <= gang.size * pick[block[n]])
    for n in names:
        model.add(
            sum(count[g, n] * gang.gpus for g, gang in enumerate(queue) if (g, n) in count)
            <= free[n]
        )
    model.maximize(sum(admit[g] * gang.size * gang.gpus for g, gang in enumerate(queue)))
    solver = _solver(time_limit)
    started = time.perf_counter()
    status = solver.solve(model)
    seconds = time.perf_counter() - started
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return {
        "status": solver.status_name(status),
        "admitted": [g.id for g, x in zip(queue, admit, strict=True) if found and solver.value(x)],
        "admitted_gpus": int(solver.objective_value),
        "bound_gpus": int(solver.best_objective_bound),
        "solver_seconds": round(seconds, 3),
    }


def placement_snapshot(
    topo: Topology, free: dict[str, int], queue: Sequence[Gang]
) -> ClusterSnapshot:
    pods: list[PodInfo] = []
    jobs: list[JobInfo] = []
    for i, (name, gpus) in enumerate(sorted(free.items())):
        used = GPUS_PER_NODE - gpus
        if used:  # the busy part of a node: one running pod
            _job, busy = gang_job(f"busy/b{i:04d}", 1, "none", gpus=used, node=[name])
            pods.extend(busy)
    for order, gang in enumerate(queue):
        job, members = gang_job(gang.id, gang.size, gang.kind, gang.gpus, order=float(order))
        jobs.append(job)
        pods.extend(members)
    return ClusterSnapshot(topo.nodes, tuple(pods), tuple(jobs), topology=topo.spec)


# Profiles measured beside the default: name -> (profile, how the docs call it).
OPTIONS: dict[str, tuple[Profile, str]] = {
    "reference": (
        Profile.reference().without("DeviceShare", "LoadAware"),
        "Koordinator's reference order",
    ),
    "largest_first": (
        core_profile().with_args("PrioritySort", largestFirst=True),
        "`largestFirst` (no window)",
    ),
}


def placed_gpus(snapshot: ClusterSnapshot, result: RoundResult) -> int:
    """GPUs the round placed."""
    return sum(int(p.requests[GPU]) for p in snapshot.pods if p.key in result.placements)


def placement_case(topo: Topology, rng: random.Random, time_limit: float) -> dict[str, Any]:
    free, queue = placement_instance(topo, rng, gangs=60)
    snapshot = placement_snapshot(topo, free, queue)
    started = time.perf_counter()
    result = plan_round(snapshot, core_profile())
    ours_seconds = time.perf_counter() - started
    ours = placed_gpus(snapshot, result)
    options = {
        name: placed_gpus(snapshot, plan_round(snapshot, p)) for name, (p, _) in OPTIONS.items()
    }
    best = placement_optimum(topo, free, queue, time_limit)
    reference = best["admitted_gpus"] if best["status"] == "OPTIMAL" else best["bound_gpus"]
    # Diagnostic: handed only the gangs the optimum admits (same order), does the engine place
    # them all? If so the gap is the queue order (FIFO admission), not the placement itself.
    chosen = set(best["admitted"])
    subset = placement_snapshot(topo, free, [g for g in queue if g.id in chosen])
    subset_gpus = placed_gpus(subset, plan_round(subset, core_profile()))
    return {
        "topology": topo.name,
        "nodes": len(topo.nodes),
        "free_gpus": sum(free.values()),
        "queued_gangs": len(queue),
        "queued_gpus": sum(g.size * g.gpus for g in queue),
        "ours_gpus": ours,
        "ours_seconds": round(ours_seconds, 4),
        "optimum_gpus": best["admitted_gpus"],
        "optimum_bound_gpus": best["bound_gpus"],
        "solver_status": best["status"],
        "solver_seconds": best["solver_seconds"],
        "gap": round((reference - ours) / reference, 4) if reference else 0.0,
        **{f"{name}_gpus": gpus for name, gpus in options.items()},
        **{
            f"{name}_gap": round((reference - gpus) / reference, 4) if reference else 0.0
            for name, gpus in options.items()
        },
        "ours_on_optimal_set_gpus": subset_gpus,
    }


# --- 2. victim choice --------------------------------------------------------------------------
PRIORITIES = (1, 10, 100, 1000)
PREEMPTOR_PRIORITY = 5000


@dataclass(frozen=True)
class Running:
    id: str
    priority: int
    gpus: int  # per pod
    nodes: tuple[str, ...]  # one entry per pod


def victim_instance(topo: Topology, rng: random.Random) -> tuple[list[Running], Gang]:
    """Fill every GPU with running jobs; jobs of several pods spread over nearby nodes."""
    free = {n.name: GPUS_PER_NODE for n in topo.nodes}
    block = topo.block_of()
    order = sorted(free, key=lambda n: (block[n], n))
    running: list[Running] = []
    while True:
        open_nodes = [n for n in order if free[n] > 0]
        if not open_nodes:
            break
        # GPUs left on a node are always even, so some shape fits the first open node
        gpus = rng.choice([g for g in (2, 4, 8, 8) if g <= free[open_nodes[0]]])
        size = rng.choice((1, 1, 2, 3, 4, 6, 8))
        nodes: list[str] = []
        for n in open_nodes:
            if free[n] >= gpus:
                free[n] -= gpus
                nodes.append(n)
                if len(nodes) == size:
                    break
        job_id = f"run/j{len(running):03d}"
        running.append(Running(job_id, rng.choice(PRIORITIES), gpus, tuple(nodes)))
    largest = max(topo.block_sizes().values())
    kind = rng.choice(("must-block", "none"))
    size = rng.randint(2, largest) if kind == "must-block" else rng.randint(2, 2 * largest)
    return running, Gang("hi/preemptor", size, GPUS_PER_NODE, kind, PREEMPTOR_PRIORITY)


def victim_optimum(
    topo: Topology, running: Sequence[Running], preemptor: Gang, time_limit: float
) -> dict[str, Any]:
    """Two CP-SAT solves: the lowest highest-victim priority, then the fewest victim jobs."""
    eligible = [r for r in running if r.priority < preemptor.priority]
    block = topo.block_of()
    blocks = sorted(set(block.values()))
    used = {n.name: 0 for n in topo.nodes}
    for r in running:
        for n in r.nodes:
            used[n] += r.gpus
    started = time.perf_counter()
    statuses: list[str] = []

    def build(max_priority: int | None) -> tuple[cp_model.CpModel, list[Any], Any]:
        model = cp_model.CpModel()
        evict = [model.new_bool_var(f"e{j}") for j in range(len(eligible))]
        release: dict[str, list[tuple[int, int]]] = {}
        for j, r in enumerate(eligible):
            for n in r.nodes:
                release.setdefault(n, []).append((j, r.gpus))
            if max_priority is not None and r.priority > max_priority:
                model.add(evict[j] == 0)
        per_node = GPUS_PER_NODE // preemptor.gpus
        take = {
            n.name: model.new_int_var(0, min(per_node, preemptor.size), f"t{n.name}")
            for n in topo.nodes
        }
        model.add(sum(take.values()) == preemptor.size)
        for n, t in take.items():
            freed = sum(evict[j] * g for j, g in release.get(n, []))
            model.add(t * preemptor.gpus <= GPUS_PER_NODE - used[n] + freed)
        if preemptor.kind == "must-block":
            pick = {b: model.new_bool_var(f"y{b}") for b in blocks}
            model.add(sum(pick.values()) == 1)
            for n, t in take.items():
                model.add(t <= preemptor.size * pick[block[n]])
        highest = model.new_int_var(0, max(PRIORITIES), "highest")
        for j, r in enumerate(eligible):
            model.add(highest >= r.priority).only_enforce_if(evict[j])
        return model, evict, highest

    model, _evict, highest = build(None)
    model.minimize(highest)
    solver = _solver(time_limit)
    status = solver.solve(model)
    statuses.append(solver.status_name(status))
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return {"status": statuses[-1], "solver_seconds": round(time.perf_counter() - started, 3)}
    best_priority = int(solver.value(highest))
    model, evict, _highest = build(best_priority)
    model.minimize(sum(evict))
    solver = _solver(time_limit)
    status = solver.solve(model)
    statuses.append(solver.status_name(status))
    return {
        "status": "/".join(statuses),
        "highest_victim_priority": best_priority,
        "victim_jobs": int(solver.objective_value),
        "victim_jobs_bound": round(solver.best_objective_bound),
        "solver_seconds": round(time.perf_counter() - started, 3),
    }


def victim_snapshot(topo: Topology, running: Sequence[Running], preemptor: Gang) -> ClusterSnapshot:
    pods: list[PodInfo] = []
    jobs: list[JobInfo] = []
    for r in running:
        job, members = gang_job(
            r.id, len(r.nodes), "none", r.gpus, priority=r.priority, node=list(r.nodes)
        )
        jobs.append(job)
        pods.extend(members)
    job, members = gang_job(
        preemptor.id, preemptor.size, preemptor.kind, preemptor.gpus, priority=preemptor.priority
    )
    return ClusterSnapshot(
        topo.nodes, tuple(pods + members), tuple([*jobs, job]), topology=topo.spec
    )


def victim_case(topo: Topology, rng: random.Random, time_limit: float) -> dict[str, Any]:
    running, preemptor = victim_instance(topo, rng)
    snapshot = victim_snapshot(topo, running, preemptor)
    started = time.perf_counter()
    result = plan_round(snapshot, core_profile())
    ours_seconds = time.perf_counter() - started
    best = victim_optimum(topo, running, preemptor, time_limit)
    row: dict[str, Any] = {
        "topology": topo.name,
        "nodes": len(topo.nodes),
        "running_jobs": len(running),
        "preemptor_pods": preemptor.size,
        "preemptor_rule": preemptor.kind,
        "ours_seconds": round(ours_seconds, 4),
        "solver_status": best["status"],
        "solver_seconds": best["solver_seconds"],
        "optimum_highest_priority": best.get("highest_victim_priority"),
        "optimum_victim_jobs": best.get("victim_jobs"),
    }
    record = result.preemptions[0] if result.preemptions else None
    row["ours_highest_priority"] = record.cost["highest_victim_priority"] if record else None
    row["ours_victim_jobs"] = len(record.victim_jobs) if record else None
    row["ratio"] = None
    row["lexicographic_miss"] = False
    if record is not None and row["optimum_victim_jobs"]:
        if row["ours_highest_priority"] == row["optimum_highest_priority"]:
            row["ratio"] = round(row["ours_victim_jobs"] / row["optimum_victim_jobs"], 3)
        else:
            row["lexicographic_miss"] = (
                row["ours_highest_priority"] > row["optimum_highest_priority"]
            )
    row["ours_missed"] = record is None and best.get("victim_jobs") is not None
    threshold = threshold_search(topo, running, preemptor)
    row["threshold_highest_priority"] = threshold[0]
    row["threshold_victim_jobs"] = threshold[1]
    return row


def threshold_search(
    topo: Topology, running: Sequence[Running], preemptor: Gang
) -> tuple[int | None, int | None]:
    """The proposed engine change, emulated from outside: offer victims in priority bands.

    For each distinct victim priority p, lowest first, the preemptor runs at priority p + 1 (so
    only jobs of priority <= p are candidates); the first band that yields a preemption fixes the
    highest victim priority, as the lexicographic cost wants.
    """
    for band in sorted({r.priority for r in running if r.priority < preemptor.priority}):
        trial = Gang(preemptor.id, preemptor.size, preemptor.gpus, preemptor.kind, band + 1)
        result = plan_round(victim_snapshot(topo, running, trial), core_profile())
        if result.preemptions:
            record = result.preemptions[0]
            return record.cost["highest_victim_priority"], len(record.victim_jobs)
    return None, None


# --- the run -----------------------------------------------------------------------------------
def summarise(placements: list[dict[str, Any]], victims: list[dict[str, Any]]) -> dict[str, Any]:
    gaps = [r["gap"] for r in placements]
    options: dict[str, Any] = {}
    for name in OPTIONS:
        option_gaps = [r[f"{name}_gap"] for r in placements]
        options[f"{name}_gap_mean"] = (
            round(sum(option_gaps) / len(option_gaps), 4) if option_gaps else None
        )
        options[f"{name}_gap_max"] = max(option_gaps) if option_gaps else None
        options[f"{name}_within_2pct"] = sum(1 for g in option_gaps if g <= 0.02)
    ratios = [r["ratio"] for r in victims if r["ratio"] is not None]
    banded = [
        r["threshold_victim_jobs"] / r["optimum_victim_jobs"]
        for r in victims
        if r["optimum_victim_jobs"]
        and r["threshold_highest_priority"] == r["optimum_highest_priority"]
    ]
    return {
        "placement_cases": len(placements),
        "placement_gap_mean": round(sum(gaps) / len(gaps), 4) if gaps else None,
        "placement_gap_max": max(gaps) if gaps else None,
        "placement_within_2pct": sum(1 for g in gaps if g <= 0.02),
        **options,
        "placement_ours_seconds_p50": percentile([r["ours_seconds"] for r in placements], 50),
        "placement_solver_seconds_p50": percentile([r["solver_seconds"] for r in placements], 50),
        "victim_cases": len(victims),
        "victim_ratio_mean": round(sum(ratios) / len(ratios), 3) if ratios else None,
        "victim_ratio_max": max(ratios) if ratios else None,
        "victim_lexicographic_misses": sum(1 for r in victims if r["lexicographic_miss"]),
        "victim_engine_found_none": sum(1 for r in victims if r["ours_missed"]),
        "victim_banded_ratio_mean": round(sum(banded) / len(banded), 3) if banded else None,
        "victim_banded_ratio_max": round(max(banded), 3) if banded else None,
        "victim_banded_lexicographic_misses": sum(
            1
            for r in victims
            if r["optimum_highest_priority"] is not None
            and r["threshold_highest_priority"] != r["optimum_highest_priority"]
        ),
        "placement_optimal_set_placed_whole": sum(
            1 for r in placements if r["ours_on_optimal_set_gpus"] == r["optimum_gpus"]
        ),
        "victim_ours_seconds_p50": percentile([r["ours_seconds"] for r in victims], 50),
        "victim_solver_seconds_p50": percentile([r["solver_seconds"] for r in victims], 50),
    }


def run(
    topologies: Sequence[str], instances: int, max_nodes: int, time_limit: float, seed: int = 5
) -> dict[str, Any]:
    placements: list[dict[str, Any]] = []
    victims: list[dict[str, Any]] = []
    total = len(topologies) * instances * 2
    with tqdm(total=total, desc="optimum", unit="case", file=sys.stderr) as bar:
        for name in topologies:
            whole = topology_by_name(name)
            rng = random.Random(f"{seed}-{name}")
            for _ in range(instances):
                cut = topology_cut(whole, max_nodes, rng)
                placements.append(placement_case(cut, rng, time_limit))
                bar.update(1)
                victims.append(victim_case(cut, rng, time_limit))
                bar.update(1)
    return {
        "benchmark": "optimum",
        "max_nodes": max_nodes,
        "time_limit_s": time_limit,
        "seed": seed,
        "summary": summarise(placements, victims),
        "placement": placements,
        "victims": victims,
    }


def markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    return (
        "\n".join(
            [
                "| measure | ours | target |",
                "|---|---:|---:|",
                f"| admitted-GPU gap to the optimum, mean / max ({s['placement_cases']} cases) | "
                f"{s['placement_gap_mean']:.2%} / {s['placement_gap_max']:.2%} | <= 2% |",
                f"| cases within 2% | {s['placement_within_2pct']} / "
                f"{s['placement_cases']} | all |",
                *(
                    f"| the same with {label}: gap mean / max, cases within 2% | "
                    f"{s[f'{name}_gap_mean']:.2%} / {s[f'{name}_gap_max']:.2%}, "
                    f"{s[f'{name}_within_2pct']} / {s['placement_cases']} | |"
                    for name, (_, label) in OPTIONS.items()
                ),
                f"| victim jobs / optimum where the highest priority ties, mean / max | "
                f"{s['victim_ratio_mean']} / {s['victim_ratio_max']} | <= 1.2 / <= 2 |",
                f"| higher highest-victim priority than the optimum | "
                f"{s['victim_lexicographic_misses']} | 0 |",
                f"| preemption found none where the optimum has one | "
                f"{s['victim_engine_found_none']} | 0 |",
                f"| victims offered in priority bands (proposal): ratio mean / max, "
                f"priority misses | {s['victim_banded_ratio_mean']} / "
                f"{s['victim_banded_ratio_max']}, {s['victim_banded_lexicographic_misses']} | |",
                f"| time p50, placement: engine / CP-SAT (s) | "
                f"{s['placement_ours_seconds_p50']:.3f} / "
                f"{s['placement_solver_seconds_p50']:.2f} | |",
                f"| time p50, victims: engine / CP-SAT (s) | "
                f"{s['victim_ours_seconds_p50']:.3f} / "
                f"{s['victim_solver_seconds_p50']:.2f} | |",
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topologies", default="synthetic,lingjun")
    parser.add_argument("--instances", type=int, default=12, help="cases of each kind a topology")
    parser.add_argument("--nodes", type=int, default=128, help="largest cut")
    parser.add_argument("--time-limit", type=float, default=20.0, help="CP-SAT seconds a solve")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    report = run(
        [t for t in args.topologies.split(",") if t],
        args.instances,
        args.nodes,
        args.time_limit,
        args.seed,
    )
    text = write_json(args.json_path, report)
    print(markdown(report) if args.markdown else text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
