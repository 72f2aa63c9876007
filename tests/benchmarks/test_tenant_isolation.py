"""The tenant-isolation benchmark's pieces, without its timing: the world, parking to the limit
through the API, the measured operations, the statistics and the section it writes."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import caches

from benchmarks import tenant_isolation as bench


@pytest.fixture(autouse=True)
def _private_cache(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "ti"}
    }
    caches["default"].clear()
    from koordweb import tasks

    # what bench.no_round_requests does for the benchmark's processes, undone after the test
    monkeypatch.setattr(tasks.run_round, "apply_async", lambda *args, **kwargs: None)


def test_the_pieces_run_end_to_end_on_a_small_world(db):
    world = bench.build_world(nodes=2, parked_jobs=3, parked_pods=6, quiet_users=1)
    world.noisy_tokens, refused = bench.tokens_to_the_cap(world.noisy_user)
    assert len(world.noisy_tokens) == 10 and refused.startswith("refused")
    parked = bench.park(world, jobs=3, pods=6)
    assert parked["answers"] == {201: 3, 429: 1} and parked["refused_with"] == "max_pending_jobs"
    raw = bench.measure(bench.token_for(world.quiet_users[0]), samples=2, tag="t")
    assert {op: [sample[1] for sample in raw[op]] for op in bench.OPERATIONS} == {
        "submit": [201, 201],
        "whatif": [200, 200],
        "list": [200, 200],
    }
    quiet = {op: bench.summary(raw[op]) for op in bench.OPERATIONS}
    assert quiet["list"]["n"] == 2 and quiet["list"]["codes"] == {"200": 2}
    assert quiet["whatif"]["cpu_median"] > 0  # the request's own CPU time, beside its wall time


def test_statistics_and_the_target():
    samples = [(float(ms), 200) for ms in range(1, 21)]
    assert bench.summary(samples) == {
        "n": 20,
        "median": 10.5,
        "p95": 19.0,
        "codes": {"200": 20},
    }
    quiet = {op: {"median": 10.0, "p95": 20.0} for op in bench.OPERATIONS}
    during = {op: {"median": 15.0, "p95": 50.0} for op in bench.OPERATIONS}
    ratio = bench.ratios(quiet, during)["whatif"]
    assert ratio == {"median": 1.5, "p95": 2.5, "met": False}


def test_the_section_is_rewritten_between_its_markers():
    phase = {op: {"median": 10.0, "p95": 20.0} for op in bench.OPERATIONS}
    result = {
        "quiet": {**phase, "rounds": {"rounds": 3, "failed": 0}},
        "during": {**phase, "rounds": {"rounds": 3, "failed": 0}, "noisy": {"whatif": {429: 5}}},
        "ratios": bench.ratios(phase, phase),
        "parked": {
            "answers": {201: 3, 429: 1},
            "refused_with": "max_pending_jobs",
            "pods_per_job": 2,
        },
        "parked_jobs": 3,
        "parked_pods": 6,
        "token_cap": "refused: limit reached",
        "nodes": 2,
        "interval_s": 1.0,
        "samples": 2,
        "database": "sqlite",
        "run_at": "now",
        "seconds": 1.0,
    }
    section = bench.markdown(result)
    assert section.startswith(bench.BEGIN) and section.endswith(bench.END)
    assert "**met**" in section and "not met" not in section
    text = f"# Reliability\n\nbefore\n\n{bench.BEGIN}\nold\n{bench.END}\n\nafter\n"
    rewritten = bench.rewrite_between(text, section)
    assert "old" not in rewritten and rewritten.count(bench.BEGIN) == 1
    assert rewritten.startswith("# Reliability\n\nbefore") and rewritten.endswith("after\n")
    assert bench.rewrite_between("# Other\n", section).endswith(bench.END + "\n")


def test_each_database_has_its_own_section():
    phase = {op: {"median": 10.0, "p95": 20.0} for op in bench.OPERATIONS}
    result = {
        "quiet": {**phase, "rounds": {}},
        "during": {**phase, "rounds": {}},
        "ratios": bench.ratios(phase, phase),
        "parked": {"answers": {}, "refused_with": "", "pods_per_job": 1},
        "parked_jobs": 1,
        "parked_pods": 1,
        "token_cap": "refused",
        "nodes": 1,
        "interval_s": 1.0,
        "samples": 1,
        "run_at": "now",
        "seconds": 1.0,
    }
    sqlite = bench.markdown({**result, "database": "sqlite"})
    postgres = bench.markdown({**result, "database": "postgresql"})
    assert sqlite.startswith(bench.BEGIN)
    begin, end = bench.markers("postgresql")
    assert postgres.startswith(begin) and postgres.endswith(end) and begin != bench.BEGIN
    text = bench.rewrite_between(bench.rewrite_between("# Reliability\n", sqlite), postgres)
    again = bench.rewrite_between(text, postgres.replace("postgresql;", "postgresql again;"))
    assert again.count(begin) == 1 and again.count(bench.BEGIN) == 1
    assert "postgresql again;" in again and sqlite in again
