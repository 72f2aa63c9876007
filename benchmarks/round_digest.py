"""Round digest: one sha256 per scenario over what a round decided, to show a refactoring of the
engine leaves its decisions exactly as they were.

    python -m benchmarks.round_digest [--nodes 1000,5000] [--text DIR]

Scenarios: the round-scale clusters (`benchmarks.round_scale.build_snapshot`, default profile,
20,000 pending pods in 2,000 gangs) at each `--nodes`, and a preemption-heavy cluster (quotas
lending and borrowing, lower-priority jobs bound everywhere, higher-priority gangs pending, some
already nominated, a PodDisruptionBudget). The digest covers, as sorted canonical lines, every
placement (pod -> node), every preemption (preemptor, victim jobs and pods, nominations, reason)
and every job not placed (code and reason text). `--text DIR` also writes the lines, to diff two
runs that disagree.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path

from benchmarks.round_scale import build_snapshot, node_counts, whole_gang
from scheduler import (
    ClusterSnapshot,
    JobInfo,
    NodeInfo,
    PodInfo,
    Profile,
    RoundResult,
    plan_round,
)
from scheduler.model import PDBInfo, QuotaInfo

GI = 1024**3


def canonical_lines(result: RoundResult) -> list[str]:
    """What the digest covers, one fact a line, sorted."""
    lines = [f"place {pod} -> {p.node}" for pod, p in result.placements.items()]
    for record in result.preemptions:
        lines.append(
            f"preempt {record.preemptor} victims={','.join(sorted(record.victim_jobs))}"
            f" pods={','.join(sorted(record.victim_pods))} reason={record.reason}"
        )
        lines += [
            f"nominate {record.preemptor} {pod} -> {node}"
            for pod, node in record.nominations.items()
        ]
    lines += [
        f"unschedulable {job} {verdict.code} {verdict.reason}"
        for job, verdict in result.unschedulable.items()
    ]
    return sorted(lines)


def digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def preemption_snapshot(n_nodes: int = 256, seed: int = 11) -> ClusterSnapshot:
    """Every node full of low-priority work in two quotas (team-b borrowing beyond its min),
    higher-priority gangs of both teams pending, a third of team-a's nominated already."""
    rng = random.Random(seed)
    nodes = tuple(
        NodeInfo(
            f"node-{i:04d}",
            {"cpu": 64_000, "memory": 512 * GI, "nvidia.com/gpu": 8, "pods": 110},
            {"pool": f"pool-{i % 4}"},
        )
        for i in range(n_nodes)
    )
    pods: list[PodInfo] = []
    jobs: list[JobInfo] = []
    for i, node in enumerate(nodes):
        for slot in range(4):
            team = "team-b" if (i + slot) % 3 else "team-a"
            name = f"low-{i:04d}-{slot}"
            pods.append(
                PodInfo(
                    team,
                    name,
                    f"{team}/{name}",
                    {"cpu": 16_000, "memory": 128 * GI, "nvidia.com/gpu": 2},
                    labels={"app": "low"} if slot == 0 else {},
                    priority=rng.choice((1, 5, 10)),
                    node=node.name,
                    phase="Running",
                    quota=team,
                )
            )
    total_gpus = 8 * n_nodes
    quotas = (
        QuotaInfo("team-a", min={"nvidia.com/gpu": total_gpus // 2}),
        QuotaInfo("team-b", min={"nvidia.com/gpu": total_gpus // 4}),
    )
    for g in range(n_nodes // 4):
        team = "team-a" if g % 2 == 0 else "team-b"
        size = rng.choice((1, 2, 4, 8))
        gang_id = f"{team}/gang-{g:04d}"
        nominated = team == "team-a" and g % 3 == 0
        members = [
            PodInfo(
                team,
                f"gang-{g:04d}-{k}",
                gang_id,
                {"cpu": 16_000, "memory": 128 * GI, "nvidia.com/gpu": rng.choice((2, 4))},
                priority=rng.choice((100, 1000)),
                gang_id=gang_id,
                quota=team,
                nominated_node=nodes[(g * 7 + k) % n_nodes].name if nominated else None,
            )
            for k in range(size)
        ]
        pods.extend(members)
        jobs.append(
            whole_gang(
                gang_id,
                members,
                priority=max(p.priority for p in members),
                quota=team,
                submission_order=float(g),
            )
        )
    pdbs = (PDBInfo("team-a", "low-a", {"app": "low"}, max_unavailable=3),)
    return ClusterSnapshot(nodes, tuple(pods), tuple(jobs), quotas, pdbs, now=0.0)


def scenarios(sizes: list[int]) -> dict[str, ClusterSnapshot]:
    built = {f"round_scale_{n}": build_snapshot(n, 20_000, 2_000) for n in sizes}
    built["preemption_heavy"] = preemption_snapshot()
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=node_counts, default="1000,5000")
    parser.add_argument("--text", help="also write each scenario's canonical lines here")
    args = parser.parse_args(argv)
    report = {}
    for name, snapshot in scenarios(args.nodes).items():
        result = plan_round(snapshot, Profile.default())
        lines = canonical_lines(result)
        report[name] = {
            "sha256": digest(lines),
            "placements": len(result.placements),
            "preemptions": len(result.preemptions),
            "unschedulable": len(result.unschedulable),
        }
        if args.text:
            Path(args.text).mkdir(parents=True, exist_ok=True)
            (Path(args.text) / f"{name}.txt").write_text("\n".join(lines) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
