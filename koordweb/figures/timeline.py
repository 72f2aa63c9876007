"""Figures over time: the preemption timeline (preemptor -> victims) and round latency.

In the preemption timeline each preemption is one bar on its preemptor's row (never one per
victim): it spans the longest run its victims had when they were preempted (the work lost) and
ends exactly at the preemption, marked by a star (a cross when no victim's start is recorded);
the victims, GPUs freed, GPU-hours lost and the reason are in its hover, said once. Every bar,
mark and row name carries the preemptor's page (`url`): figures.js opens it on a click, the
names are links.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import plotly.graph_objects as go

from koordweb.figures.base import base_layout, figure_dict, plain
from koordweb.presenters.words import counted

STATE_COLOURS = {"enacted": "#c0392b", "planned": "#f2b134", "blocked": "#7f8c8d"}
ROUND_COLOURS = {"succeeded": "#2f6fb3", "failed": "#c0392b", "running": "#f2b134"}


@dataclass(frozen=True)
class VictimSpan:
    job: str
    started_at: datetime | None
    gpus: float
    gpu_hours: float
    url: str = ""


@dataclass(frozen=True)
class PreemptionEvent:
    id: int
    at: datetime
    preemptor: str
    state: str
    reason: str
    victims: Sequence[VictimSpan] = field(default_factory=tuple)
    url: str = ""


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def _link(name: str, url: str) -> str:
    """A row's name (already `plain`), a link to its job when the viewer may open it."""
    return f'<a href="{plain(url)}">{name}</a>' if url else name


def _victims_text(victims: Sequence[VictimSpan], limit: int = 5) -> str:
    names = [plain(v.job) for v in victims[:limit]]
    more = len(victims) - limit
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def preemption_timeline(events: Sequence[PreemptionEvent]) -> dict:
    """One bar per preemption (never one per victim: a preemption of 14 jobs is one event),
    spanning the longest run it threw away and ending at the preemption; a cross when no
    victim's start is known. Its victims, GPUs and GPU-hours are in the hover, its reason once."""
    bars: dict[str, list] = {"y": [], "base": [], "x": [], "colour": [], "hover": [], "url": []}
    instant: dict[str, list] = {"x": [], "y": [], "hover": [], "url": []}
    urls: dict[str, str] = {}
    # Names as rows, ticks and hover show them: plain text, never markup (figures.base).
    for event in events:
        preemptor = plain(event.preemptor)
        urls[preemptor] = event.url
        gpus = sum(v.gpus for v in event.victims)
        hours = sum(v.gpu_hours for v in event.victims)
        count = len(event.victims)
        hover = (
            f"<b>{preemptor}</b> preempted {count} job{'' if count == 1 else 's'}: "
            f"{_victims_text(event.victims)}<br>{plain(event.reason)}"
            f"<br>GPUs freed: {round(gpus, 2):g}, GPU-hours lost: {round(hours, 2):g}"
            f"<br>state: {plain(event.state)}"
        )
        starts = [v.started_at for v in event.victims if v.started_at and v.started_at < event.at]
        if not starts:
            instant["x"].append(_iso(event.at))
            instant["y"].append(preemptor)
            instant["hover"].append(hover)
            instant["url"].append(event.url)
            continue
        start = min(starts)
        bars["y"].append(preemptor)
        bars["base"].append(_iso(start))
        # A date axis takes bar lengths in milliseconds: the bar ends at the preemption.
        bars["x"].append(round((event.at - start).total_seconds() * 1000))
        bars["colour"].append(STATE_COLOURS.get(event.state, "#c0392b"))
        bars["hover"].append(hover)
        bars["url"].append(event.url)
    rows = list(dict.fromkeys(plain(e.preemptor) for e in events))
    moments = [e.at for e in events] + [
        v.started_at for e in events for v in e.victims if v.started_at is not None
    ]
    last = max(moments, default=None)
    # At least ten minutes across, so a lone preemption is not drawn on a millisecond axis.
    first = min(min(moments), last - timedelta(minutes=10)) if last else None
    pad = (last - first) / 25 if last and first else timedelta(0)
    traces: list[go.BaseTraceType] = [
        go.Bar(
            y=bars["y"],
            base=bars["base"],
            x=bars["x"],
            orientation="h",
            marker={"color": bars["colour"]},
            hovertext=bars["hover"],
            hoverinfo="text",
            customdata=bars["url"],
            name="work lost (longest victim run)",
        ),
        go.Scatter(
            x=[_iso(e.at) for e in events],
            y=[plain(e.preemptor) for e in events],
            mode="markers",
            marker={"symbol": "star", "size": 13, "color": "#1f2a44"},
            hoverinfo="skip",
            customdata=[e.url for e in events],
            name="preemption",
        ),
    ]
    if instant["x"]:
        traces.append(
            go.Scatter(
                x=instant["x"],
                y=instant["y"],
                mode="markers",
                marker={"symbol": "x", "size": 10, "color": "#c0392b"},
                hovertext=instant["hover"],
                hoverinfo="text",
                customdata=instant["url"],
                name="victims' start unknown",
            )
        )
    figure = go.Figure(
        traces,
        layout=base_layout(
            height=max(260, 26 * len(rows) + 140),
            xaxis={
                "type": "date",
                **({"range": [_iso(first - pad), _iso(last + pad)]} if first and last else {}),
            },
            yaxis={
                "type": "category",
                "automargin": True,
                "categoryorder": "array",
                "categoryarray": rows,
                "tickmode": "array",
                "tickvals": rows,
                "ticktext": [_link(name, urls.get(name, "")) for name in rows],
            },
            # Below the date line plotly writes under the first tick.
            legend={"orientation": "h", "y": -0.28, "yanchor": "top"},
            margin={"l": 60, "r": 20, "t": 30, "b": 70},
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
    number: int | None = None  # the round's number in its cluster; the id when unknown


def round_latency(points: Sequence[RoundPoint]) -> dict:
    """Duration per round (bars coloured by state, one slot per round however many there are,
    so they never thin to needles) and jobs placed (line, right axis, whole numbers)."""
    x = [f"#{p.number if p.number is not None else p.id}" for p in points]
    step = max(1, len(points) // 12)
    figure = go.Figure(
        [
            go.Bar(
                x=x,
                y=[p.duration_ms or 0 for p in points],
                marker={"color": [ROUND_COLOURS.get(p.state, "#7f8c8d") for p in points]},
                hovertext=[
                    f"round {p.number if p.number is not None else p.id} ({p.state}) "
                    f"at {p.started_at:%H:%M:%S}<br>"
                    f"{p.duration_ms or 0} ms, {p.jobs_placed} placed, "
                    f"{counted(p.preemptions, 'preemption')}"
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
            bargap=0.15,
            xaxis={
                "type": "category",
                "tickmode": "array",
                "tickvals": x[::step],
                "title": {"text": "round"},
            },
            yaxis={"title": {"text": "ms"}, "rangemode": "tozero", "tickformat": ",d"},
            yaxis2={
                "overlaying": "y",
                "side": "right",
                "rangemode": "tozero",
                "showgrid": False,
                "tickformat": ",d",
                "dtick": max(1, -(-max((p.jobs_placed for p in points), default=1) // 5)),
                "title": {"text": "jobs placed"},
            },
            legend={"orientation": "h", "y": -0.35},
            # Room for the right axis's title beside its tick labels.
            margin={"l": 60, "r": 60, "t": 30, "b": 40},
        ),
    )
    return figure_dict(figure)


PHASE_COLOURS = ("#8fb3dc", "#2f6fb3", "#16a085")


def round_phases(phases: Sequence[tuple[str, int]]) -> dict:
    """Where one round's time went: one horizontal bar split by phase, each part labelled with
    its phase and ms (no legend: on a phone a wrapped legend covered the axis)."""
    figure = go.Figure(
        [
            go.Bar(
                y=["time"],
                x=[ms],
                orientation="h",
                name=plain(label),
                marker={"color": PHASE_COLOURS[i % len(PHASE_COLOURS)]},
                text=[f"{plain(label)} {ms:,} ms"],
                textposition="inside",
                insidetextanchor="middle",
                hovertext=[f"{plain(label)}: {ms:,} ms"],
                hoverinfo="text",
            )
            for i, (label, ms) in enumerate(phases)
        ],
        layout=base_layout(
            height=110,
            barmode="stack",
            showlegend=False,
            margin={"l": 10, "r": 10, "t": 10, "b": 30},
            xaxis={"rangemode": "tozero", "tickformat": ",d", "ticksuffix": " ms"},
            yaxis={"visible": False},
        ),
    )
    return figure_dict(figure)
