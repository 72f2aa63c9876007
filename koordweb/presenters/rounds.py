"""A round's metrics (`Round.metrics`, written by `engine.pipeline`) in plain words.

The metrics are engine and worker counters keyed by field name (`snapshot_changed_rows`,
`engine_reused`, `cpu_ms`, ...). An admin reads labelled lines with units instead, and the round
page draws where the time went (`round_phases`). Keys this module does not know are left out, so
a new counter never shows up on a page as a raw field name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordweb.presenters.quantities import number
from koordweb.presenters.words import pods


@dataclass(frozen=True)
class RoundMetrics:
    """The labelled lines of a round page, and a warning when the warm snapshot was wrong."""

    lines: tuple[tuple[str, str], ...]
    warning: str = ""


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def ms_text(value: Any) -> str:
    """'57 ms', '1,204 ms' ('—' when not recorded)."""
    amount = _int(value)
    return "—" if amount is None else f"{number(amount)} ms"


def _count(n: int, one: str, many: str) -> str:
    return f"{number(n)} {one if n == 1 else many}"


def snapshot_text(metrics: Mapping[str, Any]) -> str:
    """How the round saw the cluster: a warm snapshot updated from the rows that changed, a
    rebuild from scratch (and why), or the last round's plan reused."""
    mode = str(metrics.get("snapshot") or "")
    changed = _int(metrics.get("snapshot_changed_rows"))
    rows = _count(changed or 0, "row", "rows")
    if mode == "cold":
        why = str(metrics.get("snapshot_cold_reason") or "").strip()
        return f"rebuilt from scratch ({why})" if why else "rebuilt from scratch"
    if mode not in ("warm", "checked"):
        return ""
    if metrics.get("engine_reused"):
        text = "kept from the last round: nothing changed, so the last plan was reused"
    elif changed == 0:
        text = "kept from the last round: nothing changed"
    else:
        text = f"kept from the last round, updated with {rows} changed since"
    if mode == "checked":
        verdict = "differed" if metrics.get("warm_mismatch") else "identical"
        text += f"; checked against a rebuild from scratch: {verdict}"
    return text


def time_text(metrics: Mapping[str, Any], duration_ms: Any = None) -> str:
    """'57 ms in all: 15 ms reading the cluster, 12 ms in the engine, 1 ms recording and
    enacting; 29 ms of the worker's CPU'."""
    parts = [
        f"{ms_text(metrics[key])} {label}"
        for key, label in (
            ("sync_snapshot_ms", "reading the cluster"),
            ("engine_ms", "in the engine"),
            ("record_enact_ms", "recording and enacting"),
        )
        if _int(metrics.get(key)) is not None
    ]
    text = f"{ms_text(duration_ms)} in all" if _int(duration_ms) is not None else ""
    if parts:
        text = f"{text}: {', '.join(parts)}" if text else ", ".join(parts)
    cpu = _int(metrics.get("cpu_ms"))
    if cpu is not None:
        text += f"; {ms_text(cpu)} of the worker's CPU"
    return text


def _enacting_text(metrics: Mapping[str, Any]) -> str:
    intents = _int(metrics.get("intents")) or 0
    parts = [_count(intents, "change sent to the cluster", "changes sent to the cluster")]
    for key, one, many in (
        ("evicted", "pod evicted", "pods evicted"),
        ("evictions_replaced", "eviction replaced", "evictions replaced"),
        ("intents_dropped", "change given up", "changes given up"),
        (
            "leftover_intents",
            "change left from an earlier round",
            "changes left from earlier rounds",
        ),
        ("kubelet_rejections", "pod refused by a node", "pods refused by nodes"),
        ("pods_dropped", "pod dropped", "pods dropped"),
    ):
        n = _int(metrics.get(key))
        if n:
            parts.append(_count(n, one, many))
    return ", ".join(parts)


def round_metrics(
    metrics: Mapping[str, Any] | None, *, duration_ms: Any = None, admin: bool = True
) -> RoundMetrics:
    """The round's metrics as labelled lines; pod names (`dropped`) only for admins."""
    m = dict(metrics or {})
    lines: list[tuple[str, str]] = []
    time = time_text(m, duration_ms)
    if time:
        lines.append(("Time", time))
    snapshot = snapshot_text(m)
    if snapshot:
        lines.append(("Cluster state", snapshot))
    nodes = _int(m.get("nodes"))
    if nodes is not None:
        outside = [str(n) for n in m.get("outside_topology") or []]
        text = _count(nodes, "node", "nodes")
        if outside:
            listed = ", ".join(outside[:10]) + (", ..." if len(outside) > 10 else "")
            text += f"; {number(len(outside))} outside the topology ({listed})"
        lines.append(("Nodes", text))
    # The engine counts the pods waiting when the round began (`pending_pods`); those still
    # waiting after it are the ones it did not place.
    pending = _int(m.get("pending_pods"))
    placed = _int(m.get("pods_placed"))
    if pending is not None or placed is not None:
        before = max(pending or 0, placed or 0)
        after = before - (placed or 0)
        lines.append(
            (
                "Pods",
                f"{pods(before)} waiting when it began, {pods(placed or 0)} placed, "
                f"{pods(after)} still waiting after it",
            )
        )
    if any(_int(m.get(k)) is not None for k in ("intents", "evicted", "pods_dropped")):
        lines.append(("Enacting", _enacting_text(m)))
    dropped = m.get("dropped")
    if admin and isinstance(dropped, Mapping) and dropped:
        lines.append(
            (
                "Dropped pods",
                "; ".join(
                    f"{pod}: {why}"
                    for pod, why in sorted((str(k), str(v)) for k, v in dropped.items())
                ),
            )
        )
    warning = ""
    if m.get("warm_mismatch"):
        warning = (
            "The cluster state kept from the last round differed from a rebuild from scratch; "
            "this round used the rebuild. That is a bug: the worker's log names the rows."
        )
    return RoundMetrics(tuple(lines), warning)


def round_phases(metrics: Mapping[str, Any] | None) -> list[tuple[str, int]]:
    """(phase, ms) for the round's time bar: reading the cluster, engine, recording/enacting."""
    m = dict(metrics or {})
    out = []
    for key, label in (
        ("sync_snapshot_ms", "reading the cluster"),
        ("engine_ms", "engine"),
        ("record_enact_ms", "recording and enacting"),
    ):
        value = _int(m.get(key))
        if value is not None:
            out.append((label, value))
    return out
