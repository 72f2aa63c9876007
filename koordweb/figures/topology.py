"""Topology figures: the domain tree as a sunburst and the topology graph laid out by networkx.

Input is a flat list of `TreeNode`s (root first, parents before children). Both figures colour
each domain by the share of its accelerators (or CPU, when it has none) that is allocated and
outline the domains where a chosen job runs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import networkx as nx
import plotly.graph_objects as go

from koordweb.figures.base import ALLOCATION_SCALE, base_layout, figure_dict, plain, plain_all
from koordweb.presenters.words import counted, domain_text

HIGHLIGHT = "#d6336c"


@dataclass(frozen=True)
class TreeNode:
    key: str
    label: str
    parent: str  # "" for the root
    layer: str
    depth: int
    nodes: int  # Kubernetes nodes under this domain (1 for a node leaf)
    allocated_pct: float
    free: float  # free accelerators (cards) under the domain
    slots: int  # pods of the chosen shape that still fit
    basis: str = ""  # what allocated_pct is a share of, in words ("NPUs", "CPU")
    free_text: str = ""  # the free amount with its unit ("63 NPUs"), when it differs per domain
    cpu_used_pct: int | None = None  # reported CPU use of the nodes that report
    memory_used_pct: int | None = None
    busy_nodes: int = 0  # nodes above a load-aware threshold


def _usage_line(entry: TreeNode) -> str:
    if entry.cpu_used_pct is None and entry.memory_used_pct is None:
        return ""
    parts = [
        f"{name} used {value}%"
        for name, value in (("CPU", entry.cpu_used_pct), ("memory", entry.memory_used_pct))
        if value is not None
    ]
    busy = (
        f"<br>{entry.busy_nodes} node(s) above the load-aware threshold" if entry.busy_nodes else ""
    )
    return "<br>" + " · ".join(parts) + busy


def _hover(entry: TreeNode, unit: str) -> str:
    basis = f" of {entry.basis}" if entry.basis else ""
    free = f"free: {entry.free_text}" if entry.free_text else f"free {unit}: {entry.free:g}"
    return (
        f"<b>{plain(domain_text(f'{entry.layer}/{entry.label}'))}</b><br>"
        f"{counted(entry.nodes, 'node')}, "
        f"{entry.allocated_pct:g}%{basis} allocated<br>{free}"
        f"<br>free slots: {entry.slots}{_usage_line(entry)}"
    )


def domain_sunburst(
    tree: Sequence[TreeNode], *, highlighted: Collection[str] = (), unit: str = "GPUs"
) -> dict:
    """The domain tree, one ring per layer, sized by node count."""
    outline = [HIGHLIGHT if t.key in highlighted else "#ffffff" for t in tree]
    figure = go.Figure(
        go.Sunburst(
            ids=[t.key for t in tree],
            labels=plain_all(t.label for t in tree),
            parents=[t.parent for t in tree],
            values=[t.nodes for t in tree],
            branchvalues="total",
            marker={
                "colors": [t.allocated_pct for t in tree],
                "colorscale": ALLOCATION_SCALE,
                "cmin": 0,
                "cmax": 100,
                "showscale": True,
                "colorbar": {"title": {"text": "% alloc"}, "thickness": 12},
                "line": {
                    "color": outline,
                    "width": [3 if t.key in highlighted else 1 for t in tree],
                },
            },
            hovertext=[_hover(t, unit) for t in tree],
            hoverinfo="text",
            maxdepth=4,
            insidetextorientation="radial",
        ),
        layout=base_layout(height=520, margin={"l": 10, "r": 10, "t": 10, "b": 10}),
    )
    return figure_dict(figure)


def graph_positions(tree: Sequence[TreeNode]) -> dict[str, tuple[float, float]]:
    """A tidy layered layout: one row per layer (root on top), leaves spread evenly in
    depth-first order and every domain centred over its children. networkx walks the tree;
    coordinates are rounded to keep the payload small."""
    graph = nx.DiGraph()
    for entry in tree:
        graph.add_node(entry.key, depth=entry.depth)
        if entry.parent:
            graph.add_edge(entry.parent, entry.key)
    roots = [t.key for t in tree if not t.parent]
    leaves = [
        key
        for root in roots
        for key in nx.dfs_preorder_nodes(graph, root)
        if graph.out_degree(key) == 0
    ]
    span = max(len(leaves) - 1, 1)
    x = {key: index / span for index, key in enumerate(leaves)}
    for root in roots:
        for key in nx.dfs_postorder_nodes(graph, root):
            children = list(graph.successors(key))
            if children:
                x[key] = sum(x[c] for c in children) / len(children)
    deepest = max((t.depth for t in tree), default=0) or 1
    return {
        key: (round(x[key], 3), round(1 - graph.nodes[key]["depth"] / deepest, 3))
        for key in graph.nodes
        if key in x
    }


def topology_graph(
    tree: Sequence[TreeNode], *, highlighted: Collection[str] = (), unit: str = "GPUs"
) -> dict:
    """Domains as dots joined to their parents; the job's domains ringed in the highlight."""
    positions = graph_positions(tree)
    edge_x: list[float | None] = []
    edge_y: list[float | None] = []
    for entry in tree:
        if entry.parent in positions:
            (x0, y0), (x1, y1) = positions[entry.parent], positions[entry.key]
            edge_x += [x0, x1, None]
            edge_y += [y0, y1, None]
    shown = [t for t in tree if t.key in positions]
    traces: list[go.BaseTraceType] = [
        go.Scatter(
            x=edge_x,
            y=edge_y,
            mode="lines",
            line={"color": "#b8c2cc", "width": 1},
            hoverinfo="skip",
            showlegend=False,
        ),
        go.Scatter(
            x=[positions[t.key][0] for t in shown],
            y=[positions[t.key][1] for t in shown],
            mode="markers",
            name="domains",
            marker={
                "size": [max(6, 22 - 4 * t.depth) for t in shown],
                "color": [t.allocated_pct for t in shown],
                "colorscale": ALLOCATION_SCALE,
                "cmin": 0,
                "cmax": 100,
                "line": {"color": "#5b6770", "width": 1},
            },
            hovertext=[_hover(t, unit) for t in shown],
            hoverinfo="text",
            showlegend=False,
        ),
    ]
    marked = [t for t in shown if t.key in highlighted]
    if marked:
        traces.append(
            go.Scatter(
                x=[positions[t.key][0] for t in marked],
                y=[positions[t.key][1] for t in marked],
                mode="markers",
                name="selected job",
                marker={
                    "size": [max(10, 28 - 4 * t.depth) for t in marked],
                    "color": "rgba(0,0,0,0)",
                    "line": {"color": HIGHLIGHT, "width": 3},
                },
                hoverinfo="skip",
            )
        )
    figure = go.Figure(
        traces,
        layout=base_layout(
            height=420,
            xaxis={"visible": False},
            yaxis={"visible": False},
            legend={"orientation": "h"},
        ),
    )
    return figure_dict(figure)
