"""What every figure shares: a compact layout and the conversion to plain JSON data.

Figures skip plotly's default template (several kilobytes per figure) and keep numbers short,
so a page with 5,000 nodes still ships a small payload.

Plotly draws its own subset of HTML in tick labels, bar and hover text, legends and titles
(`<a href>`, `<b>`, `<br>`): Django's escaping does not reach it. Every text a figure shows that
someone else wrote (job, team, node, card and domain names, reasons) passes through `plain`
first, so it is shown as written and never becomes markup; only the figures' own tags stay tags.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go

FONT = {"family": "system-ui, sans-serif", "size": 12}
ALLOCATION_SCALE = [[0.0, "#e8f1fb"], [0.5, "#f2b134"], [1.0, "#c0392b"]]


def plain(text: object) -> str:
    """Text shown as written inside plotly's HTML subset: `&`, `<` and `>` as entities (plotly
    turns them back into characters, never into tags)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plain_all(texts: Iterable[object]) -> list[str]:
    return [plain(text) for text in texts]


def base_layout(**overrides: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "template": "none",
        "font": FONT,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 40},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "hoverlabel": {"align": "left"},
    }
    layout.update(overrides)
    return layout


def figure_dict(figure: go.Figure) -> dict[str, Any]:
    """The figure as plain JSON types (what `json_script` and Plotly.newPlot take)."""
    data: dict[str, Any] = json.loads(figure.to_json())
    data["layout"].pop("template", None)
    return data


def percent(part: float, whole: float) -> float:
    return round(100 * part / whole, 1) if whole else 0.0
