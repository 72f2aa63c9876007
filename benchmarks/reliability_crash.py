"""Crash trials (issue #9 item 3): a worker SIGKILLed mid-gang, 20 times over.

    python -m benchmarks.reliability_crash [--trials 20] [--json FILE]

Each trial kills the worker right after the fake API server accepts the first binding of a gang,
then a fresh worker must finish the gangs within 2 rounds with no pod bound twice; the figures go
to benchmarks/results/reliability_crash.json.
"""

from __future__ import annotations

import sys

from benchmarks.reliability_run import Option, scenario_main

OPTIONS = (Option("--trials", "KOORDWEB_RELIABILITY_TRIALS", int, 20),)


def main() -> int:
    return scenario_main(
        __doc__.splitlines()[0], "tests/reliability/test_crash.py", "reliability_crash", OPTIONS
    )


if __name__ == "__main__":
    sys.exit(main())
