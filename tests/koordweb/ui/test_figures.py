"""The figure builders are pure: plain data in, a plotly figure dict out (checked by plotly)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from koordweb.figures.capacity import accelerator_bars, capacity_bars, queue_trend, quota_bars
from koordweb.figures.devices import CardCell, ColumnGroup, column_groups, device_heatmap
from koordweb.figures.timeline import (
    PreemptionEvent,
    RoundPoint,
    VictimSpan,
    preemption_timeline,
    round_latency,
)
from koordweb.figures.topology import TreeNode, domain_sunburst, graph_positions, topology_graph

GIB = 1024**3


def valid(figure: dict) -> dict:
    """Plotly itself accepts the dict (every property name and value checked)."""
    go.Figure(figure)
    assert "template" not in figure["layout"]  # no multi-kilobyte default template shipped
    return figure


def tree() -> list[TreeNode]:
    return [
        TreeNode("cluster", "demo", "", "ClusterTopologyLayer", 0, 3, 50.0, 8, 1),
        TreeNode("SpineLayer/s1", "s1", "cluster", "SpineLayer", 1, 3, 50.0, 8, 1),
        TreeNode("BlockLayer/b1", "b1", "SpineLayer/s1", "BlockLayer", 2, 2, 75.0, 4, 0),
        TreeNode("BlockLayer/b2", "b2", "SpineLayer/s1", "BlockLayer", 2, 1, 0.0, 8, 1),
        TreeNode(
            "NodeTopologyLayer/n1", "n1", "BlockLayer/b1", "NodeTopologyLayer", 3, 1, 100.0, 0, 0
        ),
        TreeNode(
            "NodeTopologyLayer/n2", "n2", "BlockLayer/b1", "NodeTopologyLayer", 3, 1, 50.0, 4, 0
        ),
        TreeNode(
            "NodeTopologyLayer/n3", "n3", "BlockLayer/b2", "NodeTopologyLayer", 3, 1, 0.0, 8, 1
        ),
    ]


def test_capacity_bars_show_percent_and_absolute_figures() -> None:
    figure = valid(capacity_bars([("cpu", 128000, 32000), ("nvidia.com/gpu", 16, 16), ("x", 0, 0)]))
    allocated = figure["data"][1]
    assert allocated["x"] == [25.0, 100.0, 0.0]
    assert allocated["y"] == ["CPU", "GPUs", "x"]
    assert allocated["hovertext"][0] == "CPU: 32 of 128 cores"
    assert allocated["text"][1] == "16 of 16 GPUs (100%)"


def test_accelerator_bars_stack_allocated_free_and_unhealthy() -> None:
    figure = valid(accelerator_bars([("NVIDIA H100", 512, 510, 480.5)]))
    allocated, free, broken = figure["data"]
    assert allocated["x"] == [480.5] and free["x"] == [29.5] and broken["x"] == [2]
    assert broken["text"] == ["480.5 / 510 / 512"]


def test_queue_trend_draws_waiting_and_placed_per_round() -> None:
    waiting, placed = valid(queue_trend([("#1", 5, 1), ("#2", 4, 2)]))["data"]
    assert waiting["y"] == [5, 4] and placed["y"] == [1, 2]


def test_quota_bars_split_used_at_min_and_mark_runtime() -> None:
    quotas = [
        ("team-a", {"nvidia.com/gpu": 16}, {"nvidia.com/gpu": 32}, {"nvidia.com/gpu": 20}, None),
        ("team-b", {"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 24}, {"nvidia.com/gpu": 4}, None),
    ]
    figure = valid(quota_bars(quotas, "nvidia.com/gpu"))
    within, borrowed = figure["data"][0], figure["data"][1]
    assert within["y"] == [16, 4] and borrowed["y"] == [4, 0]
    assert [t["name"] for t in figure["data"]] == [
        "used within min",
        "borrowed above min",
        "min",
        "max",
    ]
    with_runtime = [(*q[:4], {"nvidia.com/gpu": 18}) for q in quotas]
    assert valid(quota_bars(with_runtime, "nvidia.com/gpu"))["data"][-1]["y"] == [18, 18]


def test_sunburst_sizes_by_nodes_and_outlines_the_job() -> None:
    figure = valid(domain_sunburst(tree(), highlighted={"BlockLayer/b1", "NodeTopologyLayer/n2"}))
    trace = figure["data"][0]
    assert trace["branchvalues"] == "total"
    values = dict(zip(trace["ids"], trace["values"], strict=True))
    assert values["cluster"] == values["BlockLayer/b1"] + values["BlockLayer/b2"]
    widths = dict(zip(trace["ids"], trace["marker"]["line"]["width"], strict=True))
    assert widths["BlockLayer/b1"] == 3 and widths["NodeTopologyLayer/n2"] == 3
    assert widths["BlockLayer/b2"] == 1
    assert "free slots: 1" in trace["hovertext"][3]


def test_graph_layout_puts_layers_in_rows_root_on_top() -> None:
    positions = graph_positions(tree())
    rows = {key: y for key, (_, y) in positions.items()}
    assert (
        rows["cluster"]
        > rows["SpineLayer/s1"]
        > rows["BlockLayer/b1"]
        > rows["NodeTopologyLayer/n1"]
    )
    assert rows["BlockLayer/b1"] == rows["BlockLayer/b2"]
    # Depth-first order keeps a block's nodes together under it.
    xs = {key: x for key, (x, _) in positions.items()}
    assert xs["NodeTopologyLayer/n1"] < xs["NodeTopologyLayer/n2"] < xs["NodeTopologyLayer/n3"]
    assert all(round(v, 3) == v for xy in positions.values() for v in xy)


def test_topology_graph_edges_and_highlight_trace() -> None:
    figure = valid(topology_graph(tree(), highlighted={"NodeTopologyLayer/n3"}))
    edges, dots, marked = figure["data"]
    assert edges["x"].count(None) == len(tree()) - 1
    assert len(dots["x"]) == len(tree())
    assert marked["name"] == "selected job" and len(marked["x"]) == 1
    assert len(valid(topology_graph(tree()))["data"]) == 2


def test_heatmap_cells_marks_and_bands() -> None:
    cells = {
        (0, 0): CardCell(100, False, True, "n1 #0"),
        (0, 1): CardCell(50, True, True, "n1 #1"),
        (1, 0): CardCell(0, False, False, "n2 #0"),
    }
    groups = [
        ColumnGroup("NUMA", "0", 0, 0),
        ColumnGroup("NUMA", "1", 1, 1),
        ColumnGroup("NVLink", "0-1", 0, 1),
    ]
    figure = valid(device_heatmap(["b1 · n1", "b1 · n2"], [0, 1], cells, groups=groups))
    heat = figure["data"][0]
    assert heat["z"] == [[100, 50], [0, None]]
    assert heat["text"] == [["", "S"], ["", ""]]
    crosses = figure["data"][1]  # the unhealthy card: a large cross over its cell
    assert crosses["x"] == ["#0"] and crosses["y"] == ["b1 · n2"]
    labels = [a["text"] for a in figure["layout"]["annotations"]]
    assert labels == ["NUMA 0", "NUMA 1", "NVLink 0-1"]
    # One rule down the heatmap where NUMA 1 starts, plus a band per group.
    lines = [s for s in figure["layout"]["shapes"] if s["type"] == "line"]
    assert len(lines) == 1 and lines[0]["x0"] == pytest.approx(0.5)


def test_column_groups_are_runs_of_equal_labels() -> None:
    assert column_groups(["0", "0", "1", "1", ""], "NUMA") == [
        ColumnGroup("NUMA", "0", 0, 1),
        ColumnGroup("NUMA", "1", 2, 3),
    ]
    assert column_groups([], "PCIe") == []


def test_preemption_timeline_one_bar_per_preemption_spanning_the_longest_lost_run() -> None:
    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    victims = (
        VictimSpan("default/small", at - timedelta(hours=2), 8, 16),
        VictimSpan("default/short", at - timedelta(hours=1), 4, 4),
        VictimSpan("default/new", None, 1, 0),
    )
    events = [PreemptionEvent(1, at, "default/big", "enacted", "needs block b1", victims)]
    figure = valid(preemption_timeline(events))
    bars, stars = figure["data"][:2]
    # One bar, on the preemptor's row, ending exactly at the preemption (issue #37 item 8).
    assert bars["y"] == ["default/big"]
    assert bars["x"] == [2 * 3600 * 1000]
    hover = bars["hovertext"][0]
    assert hover.count("needs block b1") == 1
    assert "3 jobs" in hover and "GPU-hours lost: 20" in hover and "GPUs freed: 13" in hover
    assert stars["y"] == ["default/big"]
    assert figure["layout"]["yaxis"]["tickvals"] == ["default/big"]


def test_preemption_timeline_fourteen_victims_are_one_row() -> None:
    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    victims = tuple(
        VictimSpan(f"default/v{i}", at - timedelta(minutes=10 + i), 1, 0.2) for i in range(14)
    )
    event = PreemptionEvent(1, at, "default/big", "enacted", "the same reason", victims)
    figure = valid(preemption_timeline([event]))
    assert figure["layout"]["height"] <= 300
    assert len(figure["data"][0]["y"]) == 1
    assert json.dumps(figure).count("the same reason") == 1


def test_preemption_timeline_links_bars_and_names_to_jobs() -> None:
    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    victim = VictimSpan("default/small", at - timedelta(minutes=1), 8, 0.1, "/jobs/2/")
    event = PreemptionEvent(1, at, "default/big", "enacted", "", (victim,), "/jobs/1/")
    figure = valid(preemption_timeline([event]))
    bars, stars = figure["data"]
    assert bars["customdata"] == ["/jobs/1/"] and stars["customdata"] == ["/jobs/1/"]
    axis = figure["layout"]["yaxis"]
    ticks = dict(zip(axis["tickvals"], axis["ticktext"], strict=True))
    assert ticks["default/big"] == '<a href="/jobs/1/">default/big</a>'
    # The bar ends at the preemption even when the victim ran for less than a minute.
    assert bars["x"] == [60_000]


def test_round_latency_colours_failures() -> None:
    t = datetime(2026, 12, 1, tzinfo=UTC)
    points = [
        RoundPoint(1, t, "succeeded", 40, 3, 0),
        RoundPoint(2, t + timedelta(seconds=10), "failed", None, 0, 0),
    ]
    figure = valid(round_latency(points))
    bars, placed = figure["data"]
    assert bars["y"] == [40, 0]
    assert bars["marker"]["color"] == ["#2f6fb3", "#c0392b"]
    assert placed["yaxis"] == "y2" and placed["y"] == [3, 0]
