"""The device heatmap: one row per node (grouped by block), one column per card minor.

Colour is the share of the card held (its largest resource held); shared cards carry an "S",
unhealthy ones a large dark cross (a marker trace over the cell). NUMA, PCIe and NVLink groups
are drawn as labelled bands over the columns they span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from koordweb.figures.base import ALLOCATION_SCALE, base_layout, figure_dict, plain, plain_all

# Bands sit above the heatmap at fixed pixel offsets, whatever the number of rows.
BAND_OFFSETS = {"NUMA": 4, "PCIe": 24, "NVLink": 44}
BAND_HEIGHT = 16
# The idle view: busy cards pale, idle ones amber, idle past the team's threshold red.
IDLE_SCALE = [[0.0, "#e3f1e3"], [0.5, "#f2b134"], [1.0, "#c0392b"]]


@dataclass(frozen=True)
class CardCell:
    used_pct: int | None
    shared: bool
    healthy: bool
    hover: str


@dataclass(frozen=True)
class ColumnGroup:
    kind: str  # NUMA, PCIe or NVLink
    label: str
    first: int  # column index
    last: int


def device_heatmap(
    rows: Sequence[str],
    minors: Sequence[int],
    cells: Mapping[tuple[int, int], CardCell],
    *,
    groups: Sequence[ColumnGroup] = (),
    value_title: str = "% allocated",
) -> dict:
    """`cells` is keyed by (row index, column index); missing cards stay blank. `value_title`
    names what `used_pct` holds: "% allocated", "% busy", or "idle" (0 busy, 50 idle, 100 idle
    longer than the threshold)."""
    z: list[list[int | None]] = []
    text: list[list[str]] = []
    hover: list[list[str]] = []
    for r in range(len(rows)):
        z_row: list[int | None] = []
        text_row: list[str] = []
        hover_row: list[str] = []
        for c in range(len(minors)):
            cell = cells.get((r, c))
            z_row.append(cell.used_pct if cell else None)
            text_row.append(_mark(cell))
            hover_row.append(cell.hover if cell else "")
        z.append(z_row)
        text.append(text_row)
        hover.append(hover_row)
    heatmap = go.Heatmap(
        z=z,
        x=[f"#{m}" for m in minors],
        y=plain_all(rows),
        text=text,
        texttemplate="%{text}",
        hovertext=hover,
        hoverinfo="text",
        colorscale=IDLE_SCALE if value_title == "idle" else ALLOCATION_SCALE,
        zmin=0,
        zmax=100,
        xgap=2,
        ygap=2,
        colorbar=_colorbar(value_title),
    )
    shapes, annotations = _bands(groups, len(minors))
    traces: list[go.BaseTraceType] = [heatmap]
    broken = [(r, c) for (r, c), cell in sorted(cells.items()) if not cell.healthy]
    if broken:
        # A large dark cross over the cell, whatever its colour: unhealthy cards stand out.
        traces.append(
            go.Scatter(
                x=[f"#{minors[c]}" for _, c in broken],
                y=[plain(rows[r]) for r, _ in broken],
                mode="markers",
                marker={
                    "symbol": "x-thin-open",
                    "size": 14,
                    "color": "#111111",
                    "line": {"width": 3, "color": "#111111"},
                },
                hovertext=[cells[key].hover for key in broken],
                hoverinfo="text",
                name="unhealthy",
                showlegend=False,
            )
        )
    figure = go.Figure(
        traces,
        layout=base_layout(
            height=max(260, 20 * len(rows) + 140),
            margin={"l": 10, "r": 10, "t": 90, "b": 30},
            yaxis={"autorange": "reversed", "automargin": True, "type": "category"},
            xaxis={"side": "bottom", "type": "category", "title": {"text": "card (minor)"}},
            shapes=shapes,
            annotations=annotations,
        ),
    )
    return figure_dict(figure)


def _colorbar(value_title: str) -> dict:
    if value_title != "idle":
        return {"title": {"text": value_title}, "thickness": 12}
    return {
        "title": {"text": "allocated cards"},
        "thickness": 12,
        "tickvals": [0, 50, 100],
        "ticktext": ["busy", "idle", "idle too long"],
    }


def _mark(cell: CardCell | None) -> str:
    if cell is None:
        return ""
    if not cell.healthy:
        return ""  # the cross marker says it
    return "S" if cell.shared else ""


def _bands(groups: Sequence[ColumnGroup], columns: int) -> tuple[list[dict], list[dict]]:
    shapes: list[dict] = []
    annotations: list[dict] = []
    for group in groups:
        offset = BAND_OFFSETS.get(group.kind, 4)
        x0, x1 = group.first - 0.45, group.last + 0.45
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": x0,
                "x1": x1,
                "ysizemode": "pixel",
                "yanchor": 1,
                "y0": offset,
                "y1": offset + BAND_HEIGHT,
                "line": {"width": 1, "color": "#5b6770"},
                "fillcolor": "#eef2f6",
            }
        )
        annotations.append(
            {
                "xref": "x",
                "yref": "paper",
                "x": (x0 + x1) / 2,
                "y": 1,
                "yshift": offset + BAND_HEIGHT / 2,
                "yanchor": "middle",
                "text": plain(f"{group.kind} {group.label}"),
                "showarrow": False,
                "font": {"size": 10},
            }
        )
        if group.kind == "NUMA" and group.first > 0:
            # A rule down the heatmap where a NUMA node starts: cards across it are far apart.
            shapes.append(
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": x0 - 0.05,
                    "x1": x0 - 0.05,
                    "y0": 0,
                    "y1": 1,
                    "line": {"width": 2, "color": "#1f2a44"},
                }
            )
    return shapes, annotations


def column_groups(per_column: Sequence[str], kind: str) -> list[ColumnGroup]:
    """Runs of equal labels over adjacent columns ('' = unknown, left out)."""
    groups: list[ColumnGroup] = []
    start = 0
    for index in range(1, len(per_column) + 1):
        if index == len(per_column) or per_column[index] != per_column[start]:
            if per_column[start]:
                groups.append(ColumnGroup(kind, per_column[start], start, index - 1))
            start = index
    return groups
