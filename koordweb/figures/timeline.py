"""Figures over time: the preemption timeline (preemptor -> victims) and round latency.

In the preemption timeline each victim job is a row whose bar spans the time it had run when
it was preempted (the work lost); the preemptor is a star on its own row at the moment of the
preemption, joined to its victims by a dashed line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import plotly.graph_objects as go

from koordweb.figures.base import base_layout, figure_dict

STATE_COLOURS = {"enacted": "#c0392b", "planned": "#f2b134", "blocked": "#7f8c8d"}
ROUND_COLOURS = {"succeeded": "#2f6fb3", "failed": "#c0392b", "running": "#f2b134"}


@dataclass(frozen=True)
class VictimSpan:
    job: str
    started_at: datetime | None
    gpus: float
    gpu_hours: float


@dataclass(frozen=True)
class PreemptionEvent:
    id: int
    at: datetime
    preemptor: str
    state: str
    reason: str
    victims: Sequence[VictimSpan] = field(default_factory=tuple)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def preemption_timeline(events: Sequence[PreemptionEvent]) -> dict:
    bars_y: list[str] = []
    bars_base: list[str] = []
    bars_len: list[float] = []
    bars_colour: list[str] = []
    bars_hover: list[str] = []
    link_x: list[str | None] = []
    link_y: list[str | None] = []
    for event in events:
        for victim in event.victims:
            start = victim.started_at or event.at
            bars_y.append(victim.job)
            bars_base.append(_iso(start))
            # A date axis takes bar lengths in milliseconds.
            bars_len.append(max((event.at - start).total_seconds() * 1000, 60_000))
            bars_colour.append(STATE_COLOURS.get(event.state, "#c0392b"))
            bars_hover.append(
                f"<b>{victim.job}</b> preempted by {event.preemptor}<br>{event.reason}"
                f"<br>GPUs freed: {victim.gpus:g}, GPU-hours lost: {victim.gpu_hours:g}"
                f"<br>state: {event.state}"
            )
            link_x += [_iso(event.at), _iso(event.at), None]
            link_y += [event.preemptor, victim.job, None]
    rows = len({*bars_y, *(e.preemptor for e in events)})
    traces: list[go.BaseTraceType] = [
        go.Bar(
            y=bars_y,
            base=bars_base,
            x=bars_len,
            orientation="h",
            marker={"color": bars_colour},
            hovertext=bars_hover,
            hoverinfo="text",
            name="victim run lost",
        ),
        go.Scatter(
            x=link_x,
            y=link_y,
            mode="lines",
            line={"dash": "dot", "color": "#5b6770", "width": 1},
            hoverinfo="skip",
            showlegend=False,
        ),
        go.Scatter(
            x=[_iso(e.at) for e in events],
            y=[e.preemptor for e in events],
            mode="markers",
            marker={"symbol": "star", "size": 13, "color": "#1f2a44"},
            hovertext=[
                f"<b>{e.preemptor}</b> preempted {len(e.victims)} job(s)<br>{e.reason}"
                for e in events
            ],
            hoverinfo="text",
            name="preemptor",
        ),
    ]
    figure = go.Figure(
        traces,
        layout=base_layout(
            height=max(240, 26 * rows + 110),
            xaxis={"type": "date"},
            yaxis={"type": "category", "automargin": True},
            legend={"orientation": "h", "y": -0.15},
            bargap=0.35,
        ),
    )
    return figure_dict(figure)


@dataclass(frozen=True)
class RoundPoint:
    id: int
    started_at: datetime
    state: str
    duration_ms: int | None
    jobs_placed: int
    preemptions: int


def round_latency(points: Sequence[RoundPoint]) -> dict:
    """Duration per round (bars coloured by state) and jobs placed (line, right axis)."""
    x = [_iso(p.started_at) for p in points]
    figure = go.Figure(
        [
            go.Bar(
                x=x,
                y=[p.duration_ms or 0 for p in points],
                marker={"color": [ROUND_COLOURS.get(p.state, "#7f8c8d") for p in points]},
                hovertext=[
                    f"round {p.id} ({p.state})<br>{p.duration_ms or 0} ms, "
                    f"{p.jobs_placed} placed, {p.preemptions} preemption(s)"
                    for p in points
                ],
                hoverinfo="text",
                name="duration (ms)",
            ),
            go.Scatter(
                x=x,
                y=[p.jobs_placed for p in points],
                yaxis="y2",
                mode="lines+markers",
                name="jobs placed",
                line={"color": "#16a085"},
            ),
        ],
        layout=base_layout(
            height=300,
            xaxis={"type": "date"},
            yaxis={"title": {"text": "ms"}, "rangemode": "tozero"},
            yaxis2={"overlaying": "y", "side": "right", "rangemode": "tozero", "showgrid": False},
            legend={"orientation": "h", "y": -0.25},
        ),
    )
    return figure_dict(figure)
