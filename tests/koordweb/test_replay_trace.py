"""`manage.py replay_trace` on a small synthetic trace folder: JSON/CSV shape and bad arguments."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.scheduler.fgd.builders import TraceBuilder


def write_rows(path: Path, rows: list[dict[str, str | None]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    b = TraceBuilder()
    for k in range(9):
        b.node(gpus=8 if k % 3 else 2, model="G2" if k % 3 else "T4")
    for _ in range(8):
        b.shared(470).shared(810).whole(1).whole(2, spec="G2").cpu_only()
    write_rows(tmp_path / "openb_node_list_gpu_node.csv", b.node_rows)
    write_rows(tmp_path / "openb_pod_list_default.csv", b.pod_rows)
    write_rows(tmp_path / "openb_pod_list_gpushare100.csv", b.pod_rows[:10])
    return tmp_path


def test_json_and_csv_shape(trace_dir: Path, tmp_path: Path) -> None:
    out, table = tmp_path / "r.json", tmp_path / "r.csv"
    call_command(
        "replay_trace",
        "--trace-dir",
        str(trace_dir),
        "--seeds",
        "42,43,44",
        "--json",
        str(out),
        "--csv",
        str(table),
    )
    summary = json.loads(out.read_text())
    assert summary["trace"] == "default" and summary["policy"] == "fgd"
    assert summary["seeds"] == [42, 43, 44]
    for key in ("alloc_at_100", "alloc_at_130"):
        assert len(summary[key]) == 3
        assert all(0 < v <= 100 for v in summary[key])
    assert summary["pods_per_s"] > 0
    rows = list(csv.DictReader(table.open()))
    assert [r["seed"] for r in rows] == ["42", "43", "44"]
    assert float(rows[0]["alloc_at_100"]) == summary["alloc_at_100"][0]


def test_same_seeds_same_numbers(trace_dir: Path, tmp_path: Path) -> None:
    results = []
    for k in range(2):
        out = tmp_path / f"{k}.json"
        call_command(
            "replay_trace",
            "--trace-dir",
            str(trace_dir),
            "--policy",
            "Random",
            "--trace",
            "gpushare100",
            "--seeds",
            "7",
            "--json",
            str(out),
        )
        results.append(json.loads(out.read_text())["alloc_at_100"])
    assert results[0] == results[1]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--trace", "nope"], "unknown trace 'nope'"),
        (["--policy", "BestFitPlus"], "unknown policy"),
        (["--seeds", "1,x"], "--seeds must be"),
        (["--seeds", "3,3"], "distinct"),
        (["--tune-ratio", "0.2"], "--tune-ratio"),
    ],
)
def test_bad_arguments_exit_2_with_a_reason(trace_dir: Path, args: list[str], reason: str) -> None:
    with pytest.raises(CommandError, match=reason) as caught:
        call_command("replay_trace", "--trace-dir", str(trace_dir), *args)
    assert caught.value.returncode == 2


def test_missing_trace_folder_exits_2_from_the_shell(tmp_path: Path) -> None:
    manage = Path(__file__).resolve().parents[2] / "manage.py"
    done = subprocess.run(
        [sys.executable, str(manage), "replay_trace", "--trace-dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "SECRET_KEY": "cli-test-" + "k" * 40},
    )
    assert done.returncode == 2
    assert "no openb_node_list_gpu_node.csv" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
