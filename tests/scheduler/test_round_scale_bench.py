"""The round-scale benchmark runs end to end at a small size and writes the documented JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.round_scale import (
    build_snapshot,
    main,
    normalise,
    rewrite_section,
    summary,
    target_verdict,
)


def test_small_run_writes_json_and_the_docs_section(tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# B\n\n## Round scale (engine)\nold\n\n## Next\nkept\n")
    code = main(
        [
            *("--nodes", "100,200", "--pods", "600", "--gangs", "60"),
            *("--json", str(out), "--markdown", "--docs", str(docs), "--profiles", "default,core"),
            *("--repeat", "3"),
        ]
    )
    assert code == 0
    runs = json.loads(out.read_text())["runs"]
    assert [(r["profile"], r["nodes"]) for r in runs] == [
        ("default", 100),
        ("default", 200),
        ("core", 100),
        ("core", 200),
    ]
    for run in runs:
        assert set(run) >= {"nodes", "pending_pods", "placed_pods", "round_seconds", "pods_per_s"}
        assert run["pending_pods"] == 600
        assert 0 < run["placed_pods"] <= 600
        assert run["pods_per_s"] > 0
    text = docs.read_text()
    assert "old" not in text and "## Next\nkept" in text
    assert "| default | mixed | 200 | 600 |" in text and "| core | mixed | 200 | 600 |" in text
    assert all(run["gpus"] == "mixed" for run in runs)
    assert "--repeat 3" in text
    reference = json.loads(out.read_text())["machine"]["reference_loop_cpu_s"]
    assert reference > 0 and f"took {reference:.3f} CPU-s" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "100", "--repeat", "0"], "--repeat must be at least 1"),
        (["--nodes", "abc"], "--nodes: expected a comma list of positive node counts"),
        (["--nodes", "100,-5"], "--nodes: expected a comma list of positive node counts"),
        (["--nodes", "100", "--profiles", "core,fast"], "--profiles: unknown fast"),
        (["--nodes", "100", "--gpus", "half"], "--gpus: unknown mix half"),
        (["--nodes", "100", "--pods", "0"], "--pods must be at least 1"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(args)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


def test_whole_gpu_mix_asks_for_no_shared_cards() -> None:
    snapshot = build_snapshot(64, 200, 20, gpus="whole")
    shared = [p for p in snapshot.pods if "koordinator.sh/gpu-core" in p.requests]
    assert not shared
    mixed = build_snapshot(64, 200, 20, gpus="mixed")
    assert any("koordinator.sh/gpu-core" in p.requests for p in mixed.pods)


def test_rewrite_section_only_touches_round_scale() -> None:
    text = "## Round scale (engine)\nA\n## Other\nB\n"
    assert rewrite_section(text, "NEW\n") == "## Round scale (engine)\nNEW\n\n## Other\nB\n"


def test_the_speed_target_is_judged_on_the_5000_node_rows_by_wall_time() -> None:
    runs = [
        {"profile": "core", "gpus": "mixed", "nodes": 1000, "pods_per_s": 30_000.0},
        {"profile": "core", "gpus": "mixed", "nodes": 5000, "pods_per_s": 10_500.0},
        {"profile": "default", "gpus": "mixed", "nodes": 5000, "pods_per_s": 9_999.4},
    ]
    verdict = target_verdict(runs)
    assert "core / mixed 10,500 (met)" in verdict
    assert "default / mixed 9,999 (not met)" in verdict
    assert "30,000" not in verdict
    assert target_verdict(runs[:1]) == ""


def test_the_speed_target_is_judged_normalised_when_the_reference_loop_was_measured() -> None:
    runs = [
        {"profile": "core", "gpus": "mixed", "nodes": 5000, "pods_per_s": 6_000.0},
        {"profile": "default", "gpus": "mixed", "nodes": 5000, "pods_per_s": 4_000.0},
    ]
    for run in runs:
        run["pods_per_cpu_s"] = run["pods_per_s"] + 100
    normalise(runs, reference=0.1)  # a machine twice as slow as the reference one
    assert runs[0]["pods_per_s_normalised"] == 12_000.0
    assert runs[1]["pods_per_cpu_s_normalised"] == 8_200.0
    verdict = target_verdict(runs)
    assert "core / mixed 12,200 (met)" in verdict and "default / mixed 8,200 (not met)" in verdict
    assert "normalised" in verdict
    line = summary(runs, 0.1).splitlines()[1]
    assert "6,000 pods/s raw" in line and "12,000 normalised" in line


def test_runs_as_the_script_the_docs_name() -> None:
    """`python benchmarks/round_scale.py`: no `benchmarks` package on the path then."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "benchmarks/round_scale.py", "--nodes", "abc"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--nodes: expected a comma list of positive node counts" in done.stderr
