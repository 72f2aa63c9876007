"""Deleting a cluster in the admin: the confirmation page counts what would go by kind once the
cluster is large (Django lists every node, pod and decision, each a link), and those counts are
what the deletion takes."""

from __future__ import annotations

from collections import Counter

import pytest
from django.test import Client

from koordweb import admin as koordweb_admin
from koordweb.models import Cluster, Decision, Intent, Node, Pod
from koordweb.selectors.cascade import cascade_counts
from tests.builders import Pages, busy_cluster, simulated_round
from tests.koordweb.deletion_helpers import collected


@pytest.mark.django_db
def test_cascade_counts_are_what_the_collector_deletes() -> None:
    busy = busy_cluster()
    simulated_round(busy.cluster)
    other = busy_cluster(name="other")  # not counted: another cluster's rows
    simulated_round(other.cluster)
    counts = cascade_counts(Cluster, [busy.cluster])
    assert +Counter(counts) == Counter({m: len(pks) for m, pks in collected(busy.cluster).items()})
    assert counts[Node] == 16 and counts[Pod] == Pod.objects.filter(cluster=busy.cluster).count()
    assert counts[Decision] > 0


@pytest.mark.django_db
def test_a_large_clusters_delete_page_counts_by_kind_and_the_post_deletes(
    ui: Pages, as_admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"/admin/koordweb/cluster/{ui.cluster.id}/delete/"
    listed = as_admin.get(url).content.decode()
    node = Node.objects.filter(cluster=ui.cluster).first()
    assert node is not None and f"/admin/koordweb/node/{node.id}/change/" in listed

    counts = cascade_counts(Cluster, [ui.cluster])
    monkeypatch.setattr(koordweb_admin, "LISTED_ROWS", sum(counts.values()) - 1)
    page = as_admin.get(url)
    text = page.content.decode()
    assert page.status_code == 200
    assert f"/admin/koordweb/node/{node.id}/change/" not in text
    assert f"{counts[Node]:,} nodes" in text
    assert f"{counts[Pod]:,} pods" in text

    gone = as_admin.post(url, {"post": "yes"})
    assert gone.status_code == 302
    assert not Cluster.objects.filter(id=ui.cluster.id).exists()
    assert not Pod.objects.filter(cluster_id=ui.cluster.id).exists()
    assert not Intent.objects.filter(cluster_id=ui.cluster.id).exists()
