"""The oracle as an assertion, for tests that check a round (`check_invariants`)."""

from __future__ import annotations

from collections.abc import Collection

from scheduler import ClusterSnapshot, RoundResult
from scheduler.oracle import check_round
from scheduler.vocabulary import LABEL_DISABLE_PREEMPTIBLE

PROTECT = LABEL_DISABLE_PREEMPTIBLE


def check_invariants(
    snap: ClusterSnapshot, result: RoundResult, rules: Collection[str] | None = None
) -> None:
    """Fail, listing the violations, when the round breaks one of the oracle's rules."""
    violations = check_round(snap, result, rules)
    assert not violations, "\n".join(str(v) for v in violations)
