"""GPU monitoring figures: a job's cards over its life, the efficiency ranking and its trend.

Pure builders: plain values in, a plotly dict out. Every axis names its unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import plotly.graph_objects as go

from koordweb.figures.base import base_layout, figure_dict, plain, plain_all
from koordweb.presenters.quantities import gpu_hours_text

BUSY_SCALE = [[0.0, "#f4f6f8"], [0.05, "#fbe3c4"], [0.5, "#7fc97f"], [1.0, "#1b7837"]]
USED = "#1b7837"
IDLE = "#c0392b"


def _times(starts: Sequence[datetime]) -> list[str]:
    return [s.strftime("%Y-%m-%d %H:%M") for s in starts]


def job_usage_heatmap(
    cards: Sequence[str], starts: Sequence[datetime], busy: Sequence[Sequence[float | None]]
) -> dict:
    """One row per card the job held, one column per time bucket: % of its share busy.

    Built as plain data, not graph objects: plotly's validation of a 128 x 120 grid costs more
    than the rest of the job page together."""
    heatmap = {
        "type": "heatmap",
        "z": [list(row) for row in busy],
        "x": _times(starts),
        "y": plain_all(cards),
        "zmin": 0,
        "zmax": 100,
        "colorscale": BUSY_SCALE,
        "hovertemplate": "%{y}<br>%{x} UTC<br>%{z:.0f}% of its share busy<extra></extra>",
        "colorbar": {"title": {"text": "% busy"}, "thickness": 12},
    }
    layout = base_layout(
        height=max(220, 18 * len(cards) + 120),
        xaxis={"title": {"text": "time (UTC)"}, "type": "category", "nticks": 8},
        yaxis={"title": {"text": "card (node #minor)"}, "type": "category", "automargin": True},
    )
    layout.pop("template", None)
    return {"data": [heatmap], "layout": layout}


def efficiency_bars(rows: Sequence[tuple[str, float, float]], *, title: str) -> dict:
    """Horizontal stacked bars per (name, used GPU-hours, idle-allocated GPU-hours)."""
    # Category values are shown as written by plotly's HTML subset: in ticks and in the hover.
    names = plain_all(name for name, _, _ in rows)
    used = [round(u, 2) for _, u, _ in rows]
    idle = [round(i, 2) for _, _, i in rows]
    figure = go.Figure(
        [
            go.Bar(
                y=names,
                x=idle,
                name="allocated but idle",
                orientation="h",
                marker_color=IDLE,
                hovertext=[gpu_hours_text(v) + " idle" for v in idle],
                hoverinfo="text+y",
            ),
            go.Bar(
                y=names,
                x=used,
                name="used",
                orientation="h",
                marker_color=USED,
                hovertext=[gpu_hours_text(v) + " used" for v in used],
                hoverinfo="text+y",
            ),
        ],
        layout=base_layout(
            barmode="stack",
            title={"text": title},
            height=max(200, 24 * len(rows) + 110),
            xaxis={"title": {"text": "GPU-hours"}, "tickformat": ",.4~r"},
            yaxis={"autorange": "reversed", "automargin": True, "type": "category"},
            legend={"orientation": "h", "y": -0.2},
        ),
    )
    return figure_dict(figure)


def idle_trend(
    starts: Sequence[datetime], series: Mapping[str, Sequence[float]], *, per: str
) -> dict:
    """Idle-allocated GPU-hours per team per hour (or day): one line per team."""
    x = _times(starts)
    traces = [
        go.Scatter(x=x, y=list(values), mode="lines+markers", name=plain(team))
        for team, values in sorted(series.items())
    ]
    layout = base_layout(
        height=300,
        xaxis={"title": {"text": "time (UTC)"}, "type": "category", "nticks": 8},
        yaxis={
            "title": {"text": f"idle GPU-hours per {per}"},
            "rangemode": "tozero",
            "tickformat": ",.4~r",
        },
        legend={"orientation": "h", "y": -0.3},
    )
    return figure_dict(go.Figure(traces, layout=layout))
