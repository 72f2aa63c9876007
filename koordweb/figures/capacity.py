"""Capacity figures: allocated vs allocatable per resource and per device model, and quota use.

Inputs are plain tuples so views can pass selector results straight in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from koordweb.figures.base import base_layout, figure_dict, percent, plain_all
from koordweb.presenters.quantities import (
    amount_in_unit,
    number,
    quantity_text,
    resource_label,
    resource_name,
)


def capacity_bars(usage: Sequence[tuple[str, float, float]], *, title: str = "") -> dict:
    """Horizontal bars of percent allocated per (resource, capacity, allocated), each labelled
    with its absolute figures ('480 of 512 GPUs')."""
    names = plain_all(resource_name(name) for name, _, _ in usage)
    shares = [percent(allocated, capacity) for _, capacity, allocated in usage]
    labels = plain_all(
        f"{_amount(name, allocated)} of {quantity_text(name, capacity)}"
        for name, capacity, allocated in usage
    )
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
                text=[f"{label} ({s:g}%)" for label, s in zip(labels, shares, strict=True)],
                textposition="outside",
                cliponaxis=False,
                hovertext=[f"{n}: {label}" for n, label in zip(names, labels, strict=True)],
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
            margin={"l": 60, "r": 190, "t": 30, "b": 40},
        ),
    )
    return figure_dict(figure)


def _amount(resource: str, amount: float) -> str:
    """The number alone, in the resource's unit ('480' of '512 GPUs', '1,024' of '2,048 GiB')."""
    value, _ = amount_in_unit(resource, amount)
    return number(value)


def accelerator_bars(rows: Sequence[tuple[str, int, int, float]]) -> dict:
    """Per accelerator model (name, total cards, healthy cards, cards allocated): stacked cards
    allocated, free and healthy, and unhealthy, each bar labelled 'allocated / healthy / total'."""
    names = plain_all(name for name, _, _, _ in rows)
    allocated = [round(used, 2) for _, _, _, used in rows]
    free = [max(0.0, round(healthy - used, 2)) for _, _, healthy, used in rows]
    broken = [total - healthy for _, total, healthy, _ in rows]
    labels = [
        f"{number(used)} / {number(healthy)} / {number(total)}" for _, total, healthy, used in rows
    ]
    figure = go.Figure(
        [
            go.Bar(
                y=names, x=allocated, orientation="h", name="allocated", marker={"color": "#2f6fb3"}
            ),
            go.Bar(
                y=names, x=free, orientation="h", name="free (healthy)", marker={"color": "#cfe0f3"}
            ),
            go.Bar(
                y=names,
                x=broken,
                orientation="h",
                name="unhealthy",
                marker={"color": "#c0392b"},
                text=labels,
                textposition="outside",
                cliponaxis=False,
            ),
        ],
        layout=base_layout(
            barmode="stack",
            height=max(170, 40 * len(names) + 90),
            xaxis={"title": {"text": "cards"}, "rangemode": "tozero", "tickformat": ",d"},
            yaxis={"autorange": "reversed", "automargin": True},
            legend={"orientation": "h", "y": -0.5},
            margin={"l": 60, "r": 150, "t": 30, "b": 70},
        ),
    )
    return figure_dict(figure)


def queue_trend(points: Sequence[tuple[str, int, int]]) -> dict:
    """Per round (label, jobs waiting, jobs placed), oldest first: is the queue draining?"""
    x = [label for label, _, _ in points]
    figure = go.Figure(
        [
            go.Scatter(
                x=x,
                y=[w for _, w, _ in points],
                mode="lines",
                name="jobs waiting",
                line={"color": "#f2b134"},
                fill="tozeroy",
            ),
            go.Scatter(
                x=x,
                y=[p for _, _, p in points],
                mode="lines",
                name="jobs placed",
                line={"color": "#16a085"},
            ),
        ],
        layout=base_layout(
            height=220,
            xaxis={"type": "category", "showticklabels": False, "title": {"text": "last rounds"}},
            yaxis={"rangemode": "tozero", "tickformat": ",d"},
            legend={"orientation": "h", "y": -0.3},
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
    stacked, with max and what it may use now (its runtime quota) as markers, for one resource."""
    names = plain_all(q[0] for q in quotas)
    mins = [amount_in_unit(resource, q[1].get(resource, 0))[0] for q in quotas]
    maxes = [amount_in_unit(resource, q[2].get(resource, 0))[0] for q in quotas]
    used = [amount_in_unit(resource, q[3].get(resource, 0))[0] for q in quotas]
    guaranteed = [min(u, m) for u, m in zip(used, mins, strict=True)]
    borrowed = [round(max(u - m, 0), 2) for u, m in zip(used, mins, strict=True)]
    title = resource_label(resource)
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
                y=[amount_in_unit(resource, r.get(resource, 0))[0] if r else None for r in runtime],
                mode="markers",
                name="may use now",
                marker={"symbol": "diamond", "size": 10, "color": "#16a085"},
            )
        )
    figure = go.Figure(
        traces,
        layout=base_layout(
            barmode="stack",
            height=360,
            yaxis={
                "title": {"text": title},
                "rangemode": "tozero",
                "tickformat": ",~r",
            },
            legend={"orientation": "h", "y": -0.2},
        ),
    )
    return figure_dict(figure)


def usage_bars(rows: Sequence[tuple[str, int, int | None]], *, title: str = "") -> dict:
    """Reported use per (resource name, percent used, load-aware threshold percent or None):
    one bar per resource, the threshold drawn as a red tick across it."""
    names = plain_all(name for name, _, _ in rows)
    used = [value for _, value, _ in rows]
    marked = [(name, limit) for name, (_, _, limit) in zip(names, rows, strict=True) if limit]
    traces: list[go.BaseTraceType] = [
        go.Bar(
            y=names,
            x=used,
            orientation="h",
            name="used (reported)",
            marker={"color": "#3b7dd8"},
            text=[f"{value}% used" for value in used],
            textposition="auto",
            hoverinfo="text+y",
        )
    ]
    if marked:
        traces.append(
            go.Scatter(
                y=[name for name, _ in marked],
                x=[limit for _, limit in marked],
                mode="markers",
                name="load-aware threshold",
                marker={"symbol": "line-ns", "size": 28, "line": {"width": 3, "color": "#c0392b"}},
                hovertext=[f"load-aware threshold {limit}%" for _, limit in marked],
                hoverinfo="text",
            )
        )
    extra = {"title": {"text": title}} if title else {}
    figure = go.Figure(
        traces,
        layout=base_layout(
            **extra,
            height=max(140, 40 * len(rows) + 90),
            xaxis={"title": {"text": "% of allocatable"}, "range": [0, 100]},
            yaxis={"autorange": "reversed", "automargin": True, "type": "category"},
            legend={"orientation": "h", "y": -0.4},
        ),
    )
    return figure_dict(figure)
