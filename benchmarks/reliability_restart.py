"""Service restarts (issue #9 item 4): PostgreSQL, then Redis, restarted under submission load.

    python -m benchmarks.reliability_restart [--clients 8] [--outage 10] [--cycles 3] [--json FILE]

Runs tests/reliability/test_restarts.py at full size: a private PostgreSQL (pg_ctl in a temp dir)
and a private redis-server, each stopped for `--outage` seconds and started again, `--cycles`
times, while clients submit jobs; the figures (answers during each outage, jobs answered and
found, time to the next round) go to benchmarks/results/reliability_restart.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.reliability_run import ROOT, scenario_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--outage", type=float, default=10.0, help="seconds each service is down")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/results/reliability_restart.json"
    )
    args = parser.parse_args()
    settings = {
        "KOORDWEB_RESTART_CLIENTS": str(args.clients),
        "KOORDWEB_RESTART_OUTAGE_SECONDS": str(args.outage),
        "KOORDWEB_RESTART_CYCLES": str(args.cycles),
    }
    return scenario_run("tests/reliability/test_restarts.py", args.json, settings)


if __name__ == "__main__":
    sys.exit(main())
