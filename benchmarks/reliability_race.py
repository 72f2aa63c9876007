"""Racing rounds for two minutes (issue #9 item 2): two prefork workers of concurrency 2.

    python -m benchmarks.reliability_race [--seconds 120] [--json FILE]

Rounds of one cluster are enqueued every 0.2 s while 30 gangs arrive; the figures (rounds run,
skipped at the lock, overlaps, double binds, database/cluster agreement) go to
benchmarks/results/reliability_race.json. Run with DATABASE_URL (PostgreSQL) and a Redis
CELERY_BROKER_URL as CI does; on SQLite the interval check does not apply.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.reliability_run import ROOT, scenario_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--gangs", type=int, default=30)
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/results/reliability_race.json"
    )
    args = parser.parse_args()
    settings = {
        "KOORDWEB_RELIABILITY_SECONDS": str(args.seconds),
        "KOORDWEB_RELIABILITY_GANGS": str(args.gangs),
    }
    return scenario_run("tests/reliability/test_racing.py", args.json, settings)


if __name__ == "__main__":
    sys.exit(main())
