"""Load (issue #9 item 1): 8 clients x 250 job submissions through gunicorn while rounds run.

    python -m benchmarks.reliability_load [--clients 8] [--submissions 250] [--json FILE]

Runs tests/reliability/test_load.py at full size: half the submissions reuse an Idempotency-Key
another client has just sent; the figures (answers by status, jobs created against unique keys,
p50/p95 latency, throughput, rounds) go to benchmarks/results/reliability_load.json.
"""

from __future__ import annotations

import sys

from benchmarks.reliability_run import Option, scenario_main

OPTIONS = (
    Option("--clients", "KOORDWEB_LOAD_CLIENTS", int, 8),
    Option("--submissions", "KOORDWEB_LOAD_SUBMISSIONS", int, 250, help="per client"),
)


def main() -> int:
    return scenario_main(
        __doc__.splitlines()[0], "tests/reliability/test_load.py", "reliability_load", OPTIONS
    )


if __name__ == "__main__":
    sys.exit(main())
