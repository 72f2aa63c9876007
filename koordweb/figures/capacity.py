"""Capacity figures: allocated vs allocatable per resource and per device model, and quota use.

Inputs are plain tuples so views can pass selector results straight in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from koordweb.figures.base import base_layout, figure_dict, percent

MILLI = 1000
GIB = 1024**3


def display_amount(resource: str, amount: float) -> tuple[float, str]:
    """Integer units to what people read: cpu in cores, memory-like resources in GiB."""
    if resource == "cpu":
        return round(amount / MILLI, 1), "cores"
    if resource in ("memory", "ephemeral-storage") or resource.endswith("gpu-memory"):
        return round(amount / GIB, 1), "GiB"
    return round(amount, 2), ""


def capacity_bars(usage: Sequence[tuple[str, float, float]], *, title: str = "") -> dict:
    """Horizontal bars of percent allocated per (name, capacity, allocated); hover absolute."""
    names = [name for name, _, _ in usage]
    shares = [percent(allocated, capacity) for _, capacity, allocated in usage]
    hover = []
    for name, capacity, allocated in usage:
        used, unit = display_amount(name, allocated)
        total, _ = display_amount(name, capacity)
        hover.append(f"{name}: {used} of {total} {unit}".rstrip())
    figure = go.Figure(
        [
            go.Bar(
                y=names,
                x=[100] * len(names),
                orientation="h",
                name="capacity",
                marker={"color": "#e3e8ef"},
                hoverinfo="skip",
            ),
            go.Bar(
                y=names,
                x=shares,
                orientation="h",
                name="allocated",
                marker={"color": "#2f6fb3"},
                text=[f"{s:g}%" for s in shares],
                textposition="auto",
                hovertext=hover,
                hoverinfo="text",
            ),
        ],
        layout=base_layout(
            title={"text": title} if title else None,
            barmode="overlay",
            height=max(160, 34 * len(names) + 70),
            xaxis={"range": [0, 100], "ticksuffix": "%"},
            yaxis={"autorange": "reversed", "automargin": True},
            showlegend=False,
        ),
    )
    return figure_dict(figure)


def quota_bars(
    quotas: Sequence[
        tuple[
            str, Mapping[str, int], Mapping[str, int], Mapping[str, int], Mapping[str, int] | None
        ]
    ],
    resource: str,
) -> dict:
    """Per quota (name, min, max, used, runtime|None): used within min and borrowed beyond min
    stacked, with max and runtime as markers, for one resource."""
    names = [q[0] for q in quotas]
    mins = [display_amount(resource, q[1].get(resource, 0))[0] for q in quotas]
    maxes = [display_amount(resource, q[2].get(resource, 0))[0] for q in quotas]
    used = [display_amount(resource, q[3].get(resource, 0))[0] for q in quotas]
    guaranteed = [min(u, m) for u, m in zip(used, mins, strict=True)]
    borrowed = [round(max(u - m, 0), 2) for u, m in zip(used, mins, strict=True)]
    unit = display_amount(resource, 0)[1]
    traces: list[go.BaseTraceType] = [
        go.Bar(x=names, y=guaranteed, name="used within min", marker={"color": "#2f6fb3"}),
        go.Bar(x=names, y=borrowed, name="borrowed above min", marker={"color": "#f2b134"}),
        go.Scatter(
            x=names,
            y=mins,
            mode="markers",
            name="min",
            marker={"symbol": "line-ew-open", "size": 26, "color": "#1f2a44"},
        ),
        go.Scatter(
            x=names,
            y=maxes,
            mode="markers",
            name="max",
            marker={"symbol": "triangle-down", "size": 10, "color": "#c0392b"},
        ),
    ]
    runtime = [q[4] for q in quotas]
    if any(r is not None for r in runtime):
        traces.append(
            go.Scatter(
                x=names,
                y=[display_amount(resource, r.get(resource, 0))[0] if r else None for r in runtime],
                mode="markers",
                name="runtime",
                marker={"symbol": "diamond", "size": 10, "color": "#16a085"},
            )
        )
    figure = go.Figure(
        traces,
        layout=base_layout(
            barmode="stack",
            height=360,
            yaxis={"title": {"text": f"{resource} {unit}".strip()}, "rangemode": "tozero"},
            legend={"orientation": "h", "y": -0.2},
        ),
    )
    return figure_dict(figure)
