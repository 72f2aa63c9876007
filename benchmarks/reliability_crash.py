"""Crash trials (issue #9 item 3): a worker SIGKILLed mid-gang, 20 times over.

    python -m benchmarks.reliability_crash [--trials 20] [--json FILE]

Each trial kills the worker right after the fake API server accepts the first binding of a gang,
then a fresh worker must finish the gangs within 2 rounds with no pod bound twice; the figures go
to benchmarks/results/reliability_crash.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.reliability_run import ROOT, scenario_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/results/reliability_crash.json"
    )
    args = parser.parse_args()
    settings = {"KOORDWEB_RELIABILITY_TRIALS": str(args.trials)}
    return scenario_run("tests/reliability/test_crash.py", args.json, settings)


if __name__ == "__main__":
    sys.exit(main())
