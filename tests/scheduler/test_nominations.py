"""Gang waiting time in the engine: nominated_at plus the waiting time, on the injected clock."""

from __future__ import annotations

from dataclasses import replace

from scheduler.nominations import timed_out_jobs
from scheduler.profile import Profile
from scheduler.round import plan_round
from tests.scheduler.builders import cluster, gang, node


def _snapshot(now: float):  # type: ignore[no-untyped-def]
    c = cluster()
    c.nodes.append(node("node-1").cpu(32).memory(128).build())
    # A nomination holds its node against lower or equal priority: small is below big.
    c.submit(gang("default/big", pods=2).cpu(20).priority(5))
    c.submit(gang("default/small", pods=1).cpu(8).priority(1))
    snapshot = c.snapshot()
    pods = tuple(
        replace(p, nominated_node="node-1", nominated_at=100.0) if p.job_id == "default/big" else p
        for p in snapshot.pods
    )
    return replace(snapshot, pods=pods, now=now)


def test_within_the_waiting_time_the_nominations_hold() -> None:
    snapshot = _snapshot(now=100.0 + 599)
    assert timed_out_jobs(snapshot) == {}
    result = plan_round(snapshot, Profile.default())
    assert "default/small-1" not in result.placements  # node-1's room is kept for the gang


def test_past_the_waiting_time_the_gang_lets_go() -> None:
    snapshot = _snapshot(now=100.0 + 600)
    assert set(timed_out_jobs(snapshot)) == {"default/big"}
    result = plan_round(snapshot, Profile.default())
    assert result.placements["default/small-1"].node == "node-1"
    assert "waiting time is 600 s" in result.timeouts["default/big"]
    assert "timeout" in result.unschedulable["default/big"].details
