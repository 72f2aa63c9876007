"""GPU monitoring figures: a job's cards over its life, the efficiency ranking (used, idle and
underused GPU-hours stacked to the allocation) and its trend.

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
UNDERUSED = "#f0a43a"


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


def efficiency_bars(rows: Sequence[tuple[str, float, float, float]], *, title: str) -> dict:
    """Horizontal stacked bars per (name, used, idle, underused GPU-hours): the three parts add
    up to the allocation, so each bar ends at the GPU-hours held."""
    # Category values are shown as written by plotly's HTML subset: in ticks and in the hover.
    names = plain_all(row[0] for row in rows)
    parts = [
        ("allocated but idle", [row[2] for row in rows], IDLE),
        ("used", [row[1] for row in rows], USED),
        ("allocated, busy but underused", [row[3] for row in rows], UNDERUSED),
    ]
    traces = []
    for label, amounts, colour in parts:
        values = [round(v, 2) for v in amounts]
        traces.append(
            go.Bar(
                y=names,
                x=values,
                name=label,
                orientation="h",
                marker_color=colour,
                hovertext=[f"{gpu_hours_text(v)} {label}" for v in values],
                hoverinfo="text+y",
            )
        )
    figure = go.Figure(
        traces,
        layout=base_layout(
            barmode="stack",
            title={"text": title},
            height=max(240, 24 * len(rows) + 150),
            # The legend sits at the figure's foot, under the axis title: placed on the plot
            # area (y=-0.2) it overlapped the title on a short chart.
            margin={"l": 60, "r": 20, "t": 30, "b": 90},
            xaxis={"title": {"text": "GPU-hours allocated"}, "tickformat": ",.4~r"},
            yaxis={"autorange": "reversed", "automargin": True, "type": "category"},
            legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
        ),
    )
    return figure_dict(figure)


def idle_trend(
    starts: Sequence[datetime], series: Mapping[str, Sequence[float]], *, per: str
) -> dict:
    """Wasted (allocated but unused) GPU-hours per team per hour (or day): one line per team."""
    x = _times(starts)
    traces = [
        go.Scatter(x=x, y=list(values), mode="lines+markers", name=plain(team))
        for team, values in sorted(series.items())
    ]
    layout = base_layout(
        height=300,
        xaxis={"title": {"text": "time (UTC)"}, "type": "category", "nticks": 8},
        yaxis={
            "title": {"text": f"unused GPU-hours per {per}"},
            "rangemode": "tozero",
            "tickformat": ",.4~r",
        },
        legend={"orientation": "h", "y": -0.3},
    )
    return figure_dict(go.Figure(traces, layout=layout))
