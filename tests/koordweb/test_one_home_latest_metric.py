"""A node's latest NodeMetric has one rule (`latest_node_metric_ids`: the report written last) and
every reader gets the report the engine's snapshot reads.

The export once chose by `reported_at` while the engine chose the last row written; a report that
arrives late, stamped before the one already stored, made the exported NodeMetric another report
than the one the round's load-aware plugin read.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from koordweb.engine.assembly import build_for_round
from koordweb.manifests.export import export_manifests
from koordweb.models import NodeMetric, latest_node_metric_ids
from koordweb.selectors.nodes import node_usages
from koordweb.services.gpu_history import gpu_history_compact
from tests.builders import ClusterFactory, NodeFactory

pytestmark = pytest.mark.django_db


def _report(node: object, *, minutes_ago: int, cpu: int) -> NodeMetric:
    return NodeMetric.objects.create(
        node=node, reported_at=timezone.now() - timedelta(minutes=minutes_ago), usage={"cpu": cpu}
    )


def test_the_latest_is_the_report_written_last_per_node_among_those_asked() -> None:
    cluster = ClusterFactory(name="metrics")
    n1, n2 = NodeFactory(cluster=cluster, name="n1"), NodeFactory(cluster=cluster, name="n2")
    _report(n1, minutes_ago=1, cpu=1000)
    late = _report(n1, minutes_ago=5, cpu=2000)  # written last, stamped earlier
    n2_only = _report(n2, minutes_ago=3, cpu=3000)
    other = NodeFactory(cluster=ClusterFactory(name="elsewhere"), name="n1")
    _report(other, minutes_ago=0, cpu=4000)

    mine = NodeMetric.objects.filter(node__cluster=cluster)
    latest = NodeMetric.objects.filter(id__in=latest_node_metric_ids(mine))
    assert sorted(latest.values_list("id", flat=True)) == [late.id, n2_only.id]
    assert NodeMetric.objects.filter(id__in=latest_node_metric_ids()).count() == 3
    older = mine.filter(reported_at__lt=timezone.now() - timedelta(minutes=4))
    assert list(NodeMetric.objects.filter(id__in=latest_node_metric_ids(older))) == [late]


def test_the_export_the_nodes_page_and_the_engine_read_the_same_report() -> None:
    cluster = ClusterFactory(name="metrics")
    node = NodeFactory(cluster=cluster, name="n1")
    _report(node, minutes_ago=1, cpu=1000)
    _report(node, minutes_ago=5, cpu=2000)  # arrives late: the cluster's object now says this

    snapshot, _ = build_for_round(cluster, now=timezone.now())
    (engine_node,) = snapshot.nodes
    assert engine_node.usage == {"cpu": 2000}
    assert node_usages(cluster)[node.id].used == {"cpu": 2000}
    (exported,) = [d for d in export_manifests(cluster) if d["kind"] == "NodeMetric"]
    assert exported["status"]["nodeMetric"]["nodeUsage"]["resources"] == {"cpu": "2"}


def test_pruning_old_reports_keeps_the_one_the_engine_reads() -> None:
    cluster = ClusterFactory(name="metrics")
    node = NodeFactory(cluster=cluster, name="n1")
    _report(node, minutes_ago=300, cpu=1000)
    kept = _report(node, minutes_ago=400, cpu=2000)
    gpu_history_compact(now=timezone.now())
    assert list(NodeMetric.objects.filter(node=node)) == [kept]
    snapshot, _ = build_for_round(cluster, now=timezone.now())
    assert snapshot.nodes[0].usage == {"cpu": 2000}
