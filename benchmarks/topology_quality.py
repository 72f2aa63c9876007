"""Topology quality: how well gangs land on real and synthetic GPU trees over time.

    python -m benchmarks.topology_quality [--topologies lingjun,synthetic] [--loads 0.5,0.75,1.0]
        [--ticks 240] [--profiles default,extensions,...] [--json FILE] [--markdown]

A discrete-time simulation (one tick = one minute, one round a tick) drives the real engine:
gangs of 1-64 pods x 8 GPUs arrive (Poisson, offered load = arrival rate x mean GPUs x mean
duration / cluster GPUs), a third MustGather Block (sizes capped to the largest block), a third
PreferGather Spine, a third without a rule; each tick expires finished gangs, builds a
`ClusterSnapshot`, calls `plan_round` and binds what it placed. Every profile sees the same
arrival stream. Metrics per run (after a warm-up of two mean durations, 60 ticks, or a fifth of
a short run):
- `block_locality`: of the placed gangs for which, just before their placement, one block had
  enough free nodes, the share placed inside one block;
- `span_gpu_weighted`: the height of the lowest common domain of a gang's nodes (0 node, 1 the
  lowest layer ... root), weighted by the gang's GPUs;
- `stranded_gpus` / `stranded_share`: idle GPUs in blocks with fewer free nodes than the median
  gang has pods (time average, and as a share of idle GPUs);
- `admitted_gpus` (GPUs of gangs placed) and `allocation` (time-average allocated share);
- `wait_p50_min` / `wait_p99_min` (gangs still pending at the end count with their wait so far).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from benchmarks.common import (
    GPUS_PER_NODE,
    PROFILES,
    Topology,
    gang_job,
    percentile,
    topology_by_name,
    write_json,
)
from scheduler import ClusterSnapshot, JobInfo, PodInfo, Profile, plan_round

SECTION = "## Placement quality"
GANG_SIZES = (1, 2, 4, 8, 16, 32, 64)
GANG_WEIGHTS = (30, 20, 18, 14, 9, 6, 3)
KINDS = ("must-block", "prefer-spine", "none")
MEAN_DURATION = 30.0  # ticks (minutes)


@dataclass(frozen=True)
class Arrival:
    gang_id: str
    tick: int
    size: int
    kind: str
    duration: int


def arrivals(topo: Topology, load: float, ticks: int, seed: int) -> list[Arrival]:
    """The arrival stream for one load: the same for every profile of a run."""
    rng = random.Random(seed)
    largest_block = max(topo.block_sizes().values())
    rate = load * len(topo.nodes) / (mean_gang_pods(largest_block) * MEAN_DURATION)
    out: list[Arrival] = []
    for tick in range(ticks):
        count = _poisson(rng, rate)
        for _ in range(count):
            kind = KINDS[len(out) % 3]
            size = rng.choices(GANG_SIZES, GANG_WEIGHTS)[0]
            if kind == "must-block":
                size = min(size, largest_block)
            duration = max(1, round(rng.expovariate(1 / MEAN_DURATION)))
            out.append(Arrival(f"train/g{len(out):05d}", tick, size, kind, duration))
    return out


def mean_gang_pods(largest_block: int) -> float:
    """Expected pods a gang, MustGather gangs (a third) capped to the largest block."""
    total = sum(GANG_WEIGHTS)
    free = sum(s * w for s, w in zip(GANG_SIZES, GANG_WEIGHTS, strict=True)) / total
    capped = (
        sum(min(s, largest_block) * w for s, w in zip(GANG_SIZES, GANG_WEIGHTS, strict=True))
        / total
    )
    return (2 * free + capped) / 3


def _poisson(rng: random.Random, rate: float) -> int:
    limit, k, p = math.exp(-rate), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


@dataclass
class RunningGang:
    job: JobInfo
    pods: list[PodInfo]
    ends: int


@dataclass
class Tally:
    local: int = 0
    could_local: int = 0
    span_weighted: float = 0.0
    span_gpus: int = 0
    admitted_gpus: int = 0
    waits: list[float] = field(default_factory=list)
    stranded: list[int] = field(default_factory=list)
    idle: list[int] = field(default_factory=list)
    allocated: list[int] = field(default_factory=list)
    placed: int = 0
    round_seconds: float = 0.0


class TreeIndex:
    """Per node, its domain at each layer, for span and block bookkeeping."""

    def __init__(self, topo: Topology) -> None:
        self.chain = [{n.name: n.labels[key] for n in topo.nodes} for key in topo.layer_labels]
        self.block = topo.block_of()
        self.blocks = sorted(set(self.block.values()))

    def span(self, nodes: Sequence[str]) -> int:
        """Height of the lowest common domain: 0 one node, 1 the lowest layer, ..., root."""
        if len(set(nodes)) <= 1:
            return 0
        depth = len(self.chain)
        for height, layer in enumerate(reversed(self.chain), start=1):
            if len({layer[n] for n in nodes}) == 1:
                return height
        return depth + 1


def simulate(
    topo: Topology,
    stream: Sequence[Arrival],
    profile: Profile,
    strip_rules: bool,
    ticks: int,
    median_size: float,
    progress: tqdm | None = None,
) -> dict[str, Any]:
    tree = TreeIndex(topo)
    # measure from steady state: two mean durations in, or the first fifth of a short run
    warmup = max(ticks // 5, min(ticks // 2, int(2 * MEAN_DURATION)))
    free = {n.name for n in topo.nodes}
    running: dict[str, RunningGang] = {}
    pending: dict[str, tuple[Arrival, JobInfo, list[PodInfo]]] = {}
    tally = Tally()
    by_tick: dict[int, list[Arrival]] = {}
    for a in stream:
        by_tick.setdefault(a.tick, []).append(a)
    for tick in range(ticks):
        for gid in [g for g, r in running.items() if r.ends <= tick]:
            free.update(p.node or "" for p in running.pop(gid).pods)
        for a in by_tick.get(tick, []):
            job, pods = gang_job(
                a.gang_id, a.size, a.kind, order=a.tick * 60.0, strip_rules=strip_rules
            )
            pending[a.gang_id] = (a, job, pods)
        if pending:
            snapshot = ClusterSnapshot(
                topo.nodes,
                tuple(p for r in running.values() for p in r.pods)
                + tuple(p for _a, _j, pods in pending.values() for p in pods),
                tuple(r.job for r in running.values()) + tuple(j for _a, j, _p in pending.values()),
                topology=topo.spec,
                now=tick * 60.0,
            )
            started = time.perf_counter()
            result = plan_round(snapshot, profile)
            tally.round_seconds += time.perf_counter() - started
            for gid in result.decisions:  # placement order
                arrival, job, pods = pending.pop(gid)
                nodes = [result.placements[p.key].node for p in pods]
                _account(tally, tree, free, nodes, arrival, tick, tick >= warmup)
                free.difference_update(nodes)
                bound = [
                    PodInfo(
                        p.namespace,
                        p.name,
                        p.job_id,
                        p.requests,
                        priority=p.priority,
                        gang_id=p.gang_id,
                        node=n,
                        phase="Running",
                    )
                    for p, n in zip(pods, nodes, strict=True)
                ]
                running[gid] = RunningGang(job, bound, tick + arrival.duration)
        if tick >= warmup:
            _sample(tally, tree, free, len(topo.nodes), median_size)
        if progress is not None:
            progress.update(1)
    for arrival, _job, _pods in pending.values():
        if arrival.tick >= warmup:
            tally.waits.append(float(ticks - arrival.tick))
    measured = sum(1 for a in stream if a.tick >= warmup)
    return {"gangs_arrived_measured": measured, **_summary(tally, len(topo.nodes), len(pending))}


def _account(
    tally: Tally,
    tree: TreeIndex,
    free: set[str],
    nodes: list[str],
    arrival: Arrival,
    tick: int,
    counted: bool,
) -> None:
    if not counted:
        return
    per_block: dict[str, int] = {}
    for n in free:
        per_block[tree.block[n]] = per_block.get(tree.block[n], 0) + 1
    gpus = len(nodes) * GPUS_PER_NODE
    if max(per_block.values(), default=0) >= len(nodes):
        tally.could_local += 1
        tally.local += len({tree.block[n] for n in nodes}) == 1
    tally.span_weighted += tree.span(nodes) * gpus
    tally.span_gpus += gpus
    tally.admitted_gpus += gpus
    tally.waits.append(float(tick - arrival.tick))
    tally.placed += 1


def _sample(tally: Tally, tree: TreeIndex, free: set[str], total: int, median: float) -> None:
    per_block: dict[str, int] = {}
    for n in free:
        per_block[tree.block[n]] = per_block.get(tree.block[n], 0) + 1
    stranded = sum(c for c in per_block.values() if c < median) * GPUS_PER_NODE
    tally.stranded.append(stranded)
    tally.idle.append(len(free) * GPUS_PER_NODE)
    tally.allocated.append((total - len(free)) * GPUS_PER_NODE)


def _summary(tally: Tally, nodes: int, left_pending: int) -> dict[str, Any]:
    samples = max(1, len(tally.idle))
    idle = sum(tally.idle)
    return {
        "gangs_placed": tally.placed,
        "gangs_pending_at_end": left_pending,
        "block_locality": round(tally.local / tally.could_local, 4) if tally.could_local else None,
        "could_fit_one_block": tally.could_local,
        "span_gpu_weighted": round(tally.span_weighted / max(1, tally.span_gpus), 3),
        "stranded_gpus": round(sum(tally.stranded) / samples, 1),
        "stranded_share": round(sum(tally.stranded) / idle, 4) if idle else 0.0,
        "admitted_gpus": tally.admitted_gpus,
        "allocation": round(sum(tally.allocated) / samples / (nodes * GPUS_PER_NODE), 4),
        "wait_p50_min": percentile(tally.waits, 50),
        "wait_p99_min": percentile(tally.waits, 99),
        "engine_seconds": round(tally.round_seconds, 2),
    }


def run(
    topologies: Sequence[str],
    loads: Sequence[float],
    profiles: Sequence[str],
    ticks: int,
    seed: int = 3,
) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    total = len(topologies) * len(loads) * len(profiles) * ticks
    with tqdm(total=total, desc="topology quality", unit="tick", file=sys.stderr) as bar:
        for topo_name in topologies:
            topo = topology_by_name(topo_name)
            for load in loads:
                stream = arrivals(topo, load, ticks, seed)
                median = percentile([a.size for a in stream], 50)
                for name in profiles:
                    profile, strip = PROFILES[name]
                    bar.set_postfix_str(f"{topo_name} {load:.0%} {name}")
                    row = simulate(topo, stream, profile, strip, ticks, median, bar)
                    runs.append(
                        {
                            "topology": topo_name,
                            "nodes": len(topo.nodes),
                            "load": load,
                            "profile": name,
                            "gangs_arrived": len(stream),
                            "median_gang_pods": median,
                            **row,
                        }
                    )
    return {
        "benchmark": "topology_quality",
        "ticks": ticks,
        "tick_seconds": 60,
        "seed": seed,
        "layers": {
            "lingjun": "SpineLayer = PSW (3), BlockLayer = PSW/ASW ToR (119), 847 nodes",
            "synthetic": "SpineLayer 4 > BlockLayer 8 a spine > RackLayer 8 a block > 2 nodes",
        },
        "runs": runs,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| topology | load | profile | gangs placed / arrived (measured window) |"
        " one-block when possible | GPU-weighted span | stranded GPUs (share of idle) |"
        " allocation | wait p50 / p99 (min) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        local = "n/a" if r["block_locality"] is None else f"{r['block_locality']:.1%}"
        lines.append(
            f"| {r['topology']} | {r['load']:.0%} | {r['profile']} | "
            f"{r['gangs_placed']} / {r['gangs_arrived_measured']} | {local} | "
            f"{r['span_gpu_weighted']:.2f} | "
            f"{r['stranded_gpus']:.0f} ({r['stranded_share']:.1%}) | {r['allocation']:.1%} | "
            f"{r['wait_p50_min']:.0f} / {r['wait_p99_min']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topologies", default="lingjun,synthetic")
    parser.add_argument("--loads", default="0.5,0.75,1.0")
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--ticks", type=int, default=240)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)
    report = run(
        [t for t in args.topologies.split(",") if t],
        [float(x) for x in args.loads.split(",") if x],
        [p for p in args.profiles.split(",") if p],
        args.ticks,
        args.seed,
    )
    text = write_json(args.json_path, report)
    print(markdown(report) if args.markdown else text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
