"""Runs one reliability scenario of tests/reliability/ at benchmark length and keeps its figures.

The scenarios are pytest tests (they need the test database, the fake API server in-process and
worker subprocesses); a benchmark runs the test with a longer setting through the environment and
writes the figures the test reports, plus how and where it ran, to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def scenario_run(test: str, results: Path, settings: dict[str, str]) -> int:
    """Run `test` with `settings` in the environment; the figures land in `results` (JSON)."""
    results.parent.mkdir(parents=True, exist_ok=True)
    results.unlink(missing_ok=True)
    env = {**os.environ, **settings, "KOORDWEB_RELIABILITY_RESULTS": str(results)}
    command = [sys.executable, "-m", "pytest", test, "-q", "-x", "--timeout=1200"]
    t0 = time.monotonic()
    code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
    figures = json.loads(results.read_text()) if results.exists() else {}
    figures["run"] = {
        "passed": code == 0,
        "wall_seconds": round(time.monotonic() - t0, 1),
        "command": " ".join([*(f"{k}={v}" for k, v in settings.items()), "pytest", test]),
        "database": os.environ.get("DATABASE_URL", "").split("@")[-1] or "sqlite (embedded)",
        "broker": os.environ.get("CELERY_BROKER_URL", "").split("@")[-1] or "filesystem",
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "python": platform.python_version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    results.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return code


@dataclass(frozen=True)
class Option:
    """One command-line option of a scenario and the environment setting it becomes."""

    flag: str
    setting: str
    parse: Callable[[str], Any]  # int or float
    default: float
    help: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


def scenario_main(description: str, test: str, name: str, options: Sequence[Option]) -> int:
    """The command line of one scenario: its `options`, each passed to `test` as its setting,
    and `--json` (default benchmarks/results/`name`.json); runs it (`scenario_run`)."""
    parser = argparse.ArgumentParser(description=description)
    for option in options:
        parser.add_argument(
            option.flag, type=option.parse, default=option.default, help=option.help
        )
    parser.add_argument("--json", type=Path, default=ROOT / f"benchmarks/results/{name}.json")
    args = parser.parse_args()
    settings = {option.setting: str(getattr(args, option.dest)) for option in options}
    return scenario_run(test, args.json, settings)
