"""The quality benchmarks at tiny sizes: they run, their JSON has the documented shape, and their
numbers obey what must hold whatever the engine does (the optimum is never beaten, a gang fits its
rule, the topology-blind baseline loses locality)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchmarks import optimum, topology_quality
from benchmarks.common import BLOCK, LINGJUN_CSV, lingjun, synthetic, topology_by_name

# The Lingjun dataset lies beside the checkout (../shared/data), as on CI; a clone elsewhere has
# no copy, and the project must not download one.
needs_lingjun = pytest.mark.skipif(
    not LINGJUN_CSV.exists(), reason=f"Alibaba Lingjun dataset not found at {LINGJUN_CSV}"
)

QUALITY_KEYS = {
    "topology",
    "nodes",
    "load",
    "profile",
    "gangs_arrived",
    "gangs_arrived_measured",
    "median_gang_pods",
    "gangs_placed",
    "gangs_pending_at_end",
    "block_locality",
    "could_fit_one_block",
    "span_gpu_weighted",
    "stranded_gpus",
    "stranded_share",
    "admitted_gpus",
    "allocation",
    "wait_p50_min",
    "wait_p99_min",
    "engine_seconds",
}


@needs_lingjun
def test_lingjun_topology_matches_the_dataset() -> None:
    topo = lingjun()
    assert len(topo.nodes) == 847
    assert len({n.labels[BLOCK] for n in topo.nodes}) == 119  # racks unique per switch pair
    assert len(set(topo.spine_of().values())) == 3
    assert max(topo.block_sizes().values()) == 8


def test_synthetic_tree_is_4x8x8x2() -> None:
    topo = synthetic()
    assert len(topo.nodes) == 512
    assert len(set(topo.spine_of().values())) == 4
    assert set(topo.block_sizes().values()) == {16}
    # names do not follow the tree: the first 16 names are not one block
    first = sorted(topo.nodes, key=lambda n: n.name)[:16]
    assert len({n.labels[BLOCK] for n in first}) > 1


def test_topology_quality_tiny_run_writes_valid_json(tmp_path: Path) -> None:
    out = tmp_path / "quality.json"
    code = topology_quality.main(
        [
            "--topologies",
            "synthetic",
            "--loads",
            "0.9",
            "--ticks",
            "20",
            "--profiles",
            "default,topology-blind",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == "topology_quality"
    assert [r["profile"] for r in report["runs"]] == ["default", "topology-blind"]
    for run in report["runs"]:
        assert set(run) == QUALITY_KEYS
        assert run["gangs_placed"] > 0
        assert 0 <= run["allocation"] <= 1
        assert 0 <= run["stranded_share"] <= 1
        assert run["wait_p50_min"] <= run["wait_p99_min"]
        assert run["admitted_gpus"] % 8 == 0
    default, blind = report["runs"]
    assert default["gangs_arrived"] == blind["gangs_arrived"]  # the same arrival stream
    # with rules the engine keeps gangs closer than a topology-blind placement
    assert default["span_gpu_weighted"] < blind["span_gpu_weighted"]


@needs_lingjun
def test_arrival_stream_caps_must_gather_gangs_to_a_block() -> None:
    topo = topology_by_name("lingjun")
    stream = topology_quality.arrivals(topo, 1.0, 60, seed=1)
    assert stream, "a full-load minute stream has arrivals"
    assert all(a.size <= 8 for a in stream if a.kind == "must-block")
    assert {a.kind for a in stream} == {"must-block", "prefer-spine", "none"}


def test_optimum_tiny_run_never_beaten(tmp_path: Path) -> None:
    out = tmp_path / "optimum.json"
    code = optimum.main(
        [
            "--topologies",
            "synthetic",
            "--instances",
            "1",
            "--nodes",
            "32",
            "--time-limit",
            "5",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == "optimum"
    assert report["summary"]["placement_cases"] == 1
    assert report["summary"]["victim_cases"] == 1
    (placed,) = report["placement"]
    assert placed["nodes"] <= 32
    assert placed["ours_gpus"] <= placed["optimum_bound_gpus"]
    assert 0 <= placed["gap"] <= 1
    for option in ("reference", "largest_first"):
        assert placed[f"{option}_gpus"] <= placed["optimum_bound_gpus"]
        assert 0 <= placed[f"{option}_gap"] <= 1
    (victim,) = report["victims"]
    assert victim["solver_status"].startswith("OPTIMAL")
    if victim["ours_highest_priority"] is not None:
        assert victim["ours_highest_priority"] >= victim["optimum_highest_priority"]
        if victim["ours_highest_priority"] == victim["optimum_highest_priority"]:
            assert victim["ours_victim_jobs"] >= victim["optimum_victim_jobs"]


def test_placement_model_respects_one_block_rule() -> None:
    """A MustGather gang larger than any block is never admitted by the exact model."""
    topo = optimum.topology_cut(synthetic(), 32, random.Random(0))  # two blocks of 16
    free = {n.name: 8 for n in topo.nodes}
    queue = [optimum.Gang("q/big", 20, 8, "must-block"), optimum.Gang("q/any", 20, 8, "none")]
    best = optimum.placement_optimum(topo, free, queue, time_limit=5)
    assert best["status"] == "OPTIMAL"
    assert best["admitted"] == ["q/any"]
    assert best["admitted_gpus"] == 160


def test_victim_model_prefers_low_priority_then_fewer_jobs() -> None:
    """Two nodes of one block: one holds a priority-1000 job, the other two priority-1 jobs."""
    topo = optimum.topology_cut(synthetic(), 16, random.Random(0))
    names = sorted(n.name for n in topo.nodes)
    running = [
        optimum.Running("run/high", 1000, 8, (names[0],)),
        optimum.Running("run/low-a", 1, 4, (names[1],)),
        optimum.Running("run/low-b", 1, 4, (names[1],)),
        *(optimum.Running(f"run/mid-{i}", 10, 8, (n,)) for i, n in enumerate(names[2:])),
    ]
    preemptor = optimum.Gang("hi/p", 1, 8, "must-block", 5000)
    best = optimum.victim_optimum(topo, running, preemptor, time_limit=5)
    assert best["highest_victim_priority"] == 1
    assert best["victim_jobs"] == 2


def test_quality_report_rewrites_only_its_section(tmp_path: Path) -> None:
    from benchmarks import quality_report

    results = tmp_path / "results"
    results.mkdir()
    topology_quality.main(
        [
            "--topologies",
            "synthetic",
            "--loads",
            "0.5",
            "--ticks",
            "8",
            "--profiles",
            "default",
            "--json",
            str(results / "quality_topology.json"),
        ]
    )
    docs = tmp_path / "benchmarks.md"
    docs.write_text(
        "# Benchmarks\n\n## Round scale (engine)\nkeep me\n\n"
        "## Placement quality\nold text\n\n## Later\nkeep me too\n"
    )
    quality_report.main(["--results", str(results), "--docs", str(docs)])
    text = docs.read_text()
    assert "old text" not in text
    assert "keep me\n" in text and text.endswith("## Later\nkeep me too\n")
    section = text.split("## Placement quality")[1].split("## Later")[0]
    assert "| synthetic | 50% | default |" in section
    assert "python -m benchmarks.topology_quality" in section
    assert "Against the exact optimum" not in section  # no optimum JSON given
