"""Racing rounds for two minutes (issue #9 item 2): two prefork workers of concurrency 2.

    python -m benchmarks.reliability_race [--seconds 120] [--json FILE]

Rounds of one cluster are enqueued every 0.2 s while 30 gangs arrive; the figures (rounds run,
skipped at the lock, overlaps, double binds, database/cluster agreement) go to
benchmarks/results/reliability_race.json. Run with DATABASE_URL (PostgreSQL) and a Redis
CELERY_BROKER_URL as CI does; on SQLite the interval check does not apply.
"""

from __future__ import annotations

import sys

from benchmarks.reliability_run import Option, scenario_main

OPTIONS = (
    Option("--seconds", "KOORDWEB_RELIABILITY_SECONDS", float, 120),
    Option("--gangs", "KOORDWEB_RELIABILITY_GANGS", int, 30),
)


def main() -> int:
    return scenario_main(
        __doc__.splitlines()[0], "tests/reliability/test_racing.py", "reliability_race", OPTIONS
    )


if __name__ == "__main__":
    sys.exit(main())
