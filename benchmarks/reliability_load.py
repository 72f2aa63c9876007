"""Load (issue #9 item 1): 8 clients x 250 job submissions through gunicorn while rounds run.

    python -m benchmarks.reliability_load [--clients 8] [--submissions 250] [--json FILE]

Runs tests/reliability/test_load.py at full size: half the submissions reuse an Idempotency-Key
another client has just sent; the figures (answers by status, jobs created against unique keys,
p50/p95 latency, throughput, rounds) go to benchmarks/results/reliability_load.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.reliability_run import ROOT, scenario_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--submissions", type=int, default=250, help="per client")
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/results/reliability_load.json"
    )
    args = parser.parse_args()
    settings = {
        "KOORDWEB_LOAD_CLIENTS": str(args.clients),
        "KOORDWEB_LOAD_SUBMISSIONS": str(args.submissions),
    }
    return scenario_run("tests/reliability/test_load.py", args.json, settings)


if __name__ == "__main__":
    sys.exit(main())
