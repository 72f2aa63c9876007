"""Issue #36 item 3: nothing a tenant writes is rendered as markup by plotly. Plotly draws its own
HTML subset in tick labels, bar labels, legends and hover text, out of Django's escaping: a job
named `<a href=...>` showed a live link on the admin's preemption timeline and the efficiency
page. Every figure builder is fed hostile names here; its JSON may hold no tag of theirs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from koordweb.figures.base import plain
from koordweb.figures.capacity import accelerator_bars, capacity_bars, quota_bars
from koordweb.figures.devices import CardCell, ColumnGroup, device_heatmap
from koordweb.figures.gpu_usage import efficiency_bars, idle_trend, job_usage_heatmap
from koordweb.figures.timeline import PreemptionEvent, VictimSpan, preemption_timeline, round_phases
from koordweb.figures.topology import TreeNode, domain_sunburst

LINK = '<a href="https://evil.example/">click</a>'
BOLD = "<b>loud</b>"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _figures() -> dict[str, dict]:
    victim = VictimSpan(f"ns/{LINK}", NOW - timedelta(hours=1), 8, 8, url="/jobs/2/")
    event = PreemptionEvent(1, NOW, f"ns/{BOLD}", "enacted", f"for {LINK}", (victim,), "/jobs/1/")
    tree = [
        TreeNode("root", BOLD, "", "ClusterLayer", 0, 1, 50.0, 1, 1),
        TreeNode("n", LINK, "root", "NodeLayer", 1, 1, 50.0, 1, 1),
    ]
    return {
        "timeline": preemption_timeline([event]),
        "phases": round_phases([(LINK, 3)]),
        "efficiency": efficiency_bars(
            [(f"ns/{LINK}", 1.0, 2.0, 0.5), (BOLD, 1.0, 1.0, 0.0)], title="t"
        ),
        "trend": idle_trend([NOW], {LINK: [1.0]}, per="hour"),
        "usage": job_usage_heatmap([LINK], [NOW], [[50.0]]),
        "quotas": quota_bars([(LINK, {"cpu": 1000}, {"cpu": 2000}, {"cpu": 500}, None)], "cpu"),
        "capacity": capacity_bars([("<b>loud", 10, 5)]),  # a resource: its name after "/"
        "accelerators": accelerator_bars([(LINK, 8, 8, 4)]),
        "devices": device_heatmap(
            [LINK],
            [0],
            {(0, 0): CardCell(50, False, True, "card")},
            groups=[ColumnGroup("NVLink", LINK, 0, 0)],
        ),
        "sunburst": domain_sunburst(tree),
    }


@pytest.mark.parametrize("name", sorted(_figures()))
def test_no_tenant_text_becomes_markup(name):
    text = json.dumps(_figures()[name])
    assert '<a href=\\"https://evil' not in text
    assert "<b>loud" not in text
    assert "&lt;" in text  # the names are there, shown as written


def test_the_timeline_keeps_its_own_links():
    figure = _figures()["timeline"]
    ticks = figure["layout"]["yaxis"]["ticktext"]
    # one row per preemption, named by its preemptor and linked to it; the victims in its hover
    assert '<a href="/jobs/1/">ns/' + plain(BOLD) + "</a>" in ticks
    hover = json.dumps(figure["data"])
    assert plain(LINK) in hover or json.dumps(plain(LINK))[1:-1] in hover
    assert LINK not in hover
