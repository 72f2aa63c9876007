"""Pickers and tables say resources and layers in words: the topology page's domain table, the
quota and pod-shape pickers (keys submitted, words shown) and the two GPU-memory shares."""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from koordweb.forms import JobSubmitForm, PodShapeForm, QuotaResourceForm
from koordweb.models import ElasticQuota, Job
from tests.builders import Pages

GIB = 1024**3
RAW_LAYER = re.compile(r"\w+Layer\b")
RAW_KEY = re.compile(r"\b[\w.-]+\.(?:com|sh|io)/[\w.-]+")


class _Table(HTMLParser):
    """The cells of the first table after a heading, row by row."""

    def __init__(self, heading: str) -> None:
        super().__init__()
        self.heading, self.seen, self.done = heading, False, False
        self.rows: list[list[str]] = []
        self._h2 = self._cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h2":
            self._h2 = True
        elif self.seen and not self.done and tag == "tr":
            self.rows.append([])
        elif self.seen and not self.done and tag in ("td", "th"):
            self._cell = True
            self.rows[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._h2 = False
        elif tag in ("td", "th"):
            self._cell = False
        elif tag == "table" and self.seen:
            self.done = True

    def handle_data(self, data: str) -> None:
        if self._h2 and data.strip() == self.heading:
            self.seen = True
        elif self._cell and not self.done:
            self.rows[-1][-1] += data.strip()


def table_after(html: str, heading: str) -> list[list[str]]:
    parser = _Table(heading)
    parser.feed(html)
    return parser.rows


def option_texts(html: str, name: str) -> dict[str, str]:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S)
    assert select, name
    found = re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select.group(1))
    return {unescape(value): unescape(text) for value, text in found}


def test_topology_table_names_layers_and_parents_in_words(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(reverse("topology")).content.decode()
    header, *rows = table_after(html, "Domains")
    assert header[:3] == ["Layer", "Domain", "Parent"]
    by_domain = {row[1]: row for row in rows}
    assert by_domain["s1"][0] == "spine" and by_domain["s1"][2] == "the whole cluster"
    assert by_domain["b1"][0] == "block" and by_domain["b1"][2] == "spine s1"
    assert by_domain["b3"][2] == "spine s2"
    for row in rows:
        assert not RAW_LAYER.search(" ".join(row)), row
    layers_line = re.search(r"Layers: ([^.]*)\.", html)
    assert layers_line and layers_line.group(1) == "spine → block → node"


def test_quota_picker_shows_words_and_submits_keys(ui: Pages, as_admin: Client) -> None:
    root = ElasticQuota.objects.get(cluster=ui.cluster, name="root")
    root.max = {
        **root.max,
        "koordinator.sh/gpu-memory": 640 * GIB,
        "koordinator.sh/gpu-memory-ratio": 800,
    }
    root.save()
    html = as_admin.get(reverse("quotas")).content.decode()
    options = option_texts(html, "resource")
    assert options["nvidia.com/gpu"] == "GPUs"
    assert options["cpu"] == "CPU (cores)"
    assert options["koordinator.sh/gpu-memory"] == "GPU memory (GiB)"
    assert options["koordinator.sh/gpu-memory-ratio"] == "Share of a GPU's memory (% of a card)"
    for text in options.values():
        assert not RAW_KEY.search(text), text
    # The key is what the form takes back.
    chosen = as_admin.get(reverse("quotas"), {"resource": "koordinator.sh/gpu-memory-ratio"})
    assert chosen.context["resource"] == "koordinator.sh/gpu-memory-ratio"
    # The table's rows name the two shares apart, with their own units, and show no key.
    text = unescape(html)
    assert "640 GiB of GPU memory" in text and "the memory of 8 GPUs" in text
    table = html.split("<table", 1)[1].split("</table>", 1)[0]
    assert not RAW_KEY.search(re.sub(r"<[^>]+>", " ", table))


def test_pickers_keep_keys_as_values() -> None:
    resources = ["huawei.com/npu", "koordinator.sh/gpu-core", "nvidia.com/gpu"]
    quota = QuotaResourceForm(resources=resources)
    shape = PodShapeForm(resources=resources, jobs=Job.objects.none())
    for form in (quota, shape):
        choices = dict(form.fields["resource"].choices)  # type: ignore[attr-defined]
        assert choices == {
            "huawei.com/npu": "NPUs",
            "koordinator.sh/gpu-core": "GPU core (% of a card)",
            "nvidia.com/gpu": "GPUs",
        }
    bound = QuotaResourceForm({"resource": "huawei.com/npu"}, resources=resources)
    assert bound.is_valid() and bound.cleaned_data["resource"] == "huawei.com/npu"


@pytest.mark.django_db
def test_submit_form_offers_layers_in_words() -> None:
    form = JobSubmitForm(quotas=["q"], priority_classes=[], layers=["SpineLayer", "BlockLayer"])
    layers = dict(form.fields["gather_layer"].choices)  # type: ignore[attr-defined]
    assert layers == {"": "no constraint", "SpineLayer": "spine", "BlockLayer": "block"}


def test_topology_shape_picker_shows_words(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(reverse("topology")).content.decode()
    options = option_texts(html, "resource")
    assert options["nvidia.com/gpu"] == "GPUs"
    assert all(not RAW_KEY.search(text) for text in options.values()), options


def test_job_page_and_topology_hover_say_layers_in_words(ui: Pages, as_admin: Client) -> None:
    from koordweb.presenters.words import topology_rule_text

    spec = {
        "gatherStrategy": [
            {"layer": "SpineLayer", "strategy": "PreferGather"},
            {"layer": "BlockLayer", "strategy": "MustGather"},
        ]
    }
    assert topology_rule_text(spec) == "preferably in one spine; all in one block"
    assert topology_rule_text({}) == "no constraint"
    Job.objects.filter(pk=ui.running.pk).update(topology_spec=spec)
    html = as_admin.get(reverse("job-detail", args=[ui.running.pk])).content.decode()
    assert "preferably in one spine; all in one block" in html
    assert "MustGather" not in html and "PreferGather" not in html
    from koordweb.figures.topology import TreeNode, domain_sunburst

    tree = [
        TreeNode("root", "", "", "ClusterTopologyLayer", 0, 2, 50.0, 8, 2),
        TreeNode("b1", "b1", "root", "BlockLayer", 1, 2, 50.0, 8, 2),
    ]
    hovers = domain_sunburst(tree)["data"][0]["hovertext"]
    assert hovers[1].startswith("<b>block b1</b>") and hovers[0].startswith("<b>the whole cluster")
    assert not any(RAW_LAYER.search(text) for text in hovers), hovers
