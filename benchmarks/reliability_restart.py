"""Service restarts (issue #9 item 4): PostgreSQL, then Redis, restarted under submission load.

    python -m benchmarks.reliability_restart [--clients 8] [--outage 10] [--cycles 3] [--json FILE]

Runs tests/reliability/test_restarts.py at full size: a private PostgreSQL (pg_ctl in a temp dir)
and a private redis-server, each stopped for `--outage` seconds and started again, `--cycles`
times, while clients submit jobs; the figures (answers during each outage, jobs answered and
found, time to the next round) go to benchmarks/results/reliability_restart.json.
"""

from __future__ import annotations

import sys

from benchmarks.reliability_run import Option, scenario_main

OPTIONS = (
    Option("--clients", "KOORDWEB_RESTART_CLIENTS", int, 8),
    Option(
        "--outage",
        "KOORDWEB_RESTART_OUTAGE_SECONDS",
        float,
        10.0,
        help="seconds each service is down",
    ),
    Option("--cycles", "KOORDWEB_RESTART_CYCLES", int, 3),
)


def main() -> int:
    return scenario_main(
        __doc__.splitlines()[0],
        "tests/reliability/test_restarts.py",
        "reliability_restart",
        OPTIONS,
    )


if __name__ == "__main__":
    sys.exit(main())
