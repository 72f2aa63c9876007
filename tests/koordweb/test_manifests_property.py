"""Property: for generated clusters, export(import(x)) is a fixed point and amounts survive."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordweb.manifests import export_manifests, import_manifests
from koordweb.models import Cluster, Pod

NODES = [
    {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"n{i}", "labels": {"network.topology.nvidia.com/spine": "s1"}},
        "status": {"capacity": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"}},
    }
    for i in range(3)
]
_names = itertools.count()

amounts = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.integers(1, 64_000),
        "memory": st.integers(1, 2**40),
        "nvidia.com/gpu": st.integers(0, 8),
        "koordinator.sh/gpu-memory-ratio": st.integers(0, 800),
    },
)
gang_settings = st.fixed_dictionaries(
    {
        "gang.scheduling.koordinator.sh/min-available": st.integers(1, 3).map(str),
        "gang.scheduling.koordinator.sh/mode": st.sampled_from(["Strict", "NonStrict"]),
        "gang.scheduling.koordinator.sh/waiting-time": st.sampled_from(["30s", "10m", "1h"]),
    }
)


@st.composite
def pods(draw):
    gangs = draw(st.lists(gang_settings, min_size=0, max_size=2))
    documents = []
    for i in range(draw(st.integers(1, 6))):
        requests = draw(amounts)
        node = draw(st.sampled_from([None, "n0", "n1", "n2"]))
        gang = draw(st.sampled_from([None, *range(len(gangs))]))
        annotations = {}
        if gang is not None:
            annotations = {"gang.scheduling.koordinator.sh/name": f"g{gang}", **gangs[gang]}
        spec = {
            "priority": draw(st.integers(-10, 10_000)),
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "resources": {
                        "requests": {
                            name: f"{amount}m" if name == "cpu" else str(amount)
                            for name, amount in requests.items()
                        }
                    },
                }
            ],
        }
        if node:
            spec["nodeName"] = node
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "annotations": annotations},
                "spec": spec,
                "status": {
                    "phase": draw(st.sampled_from(["Running", "Succeeded"])) if node else "Pending"
                },
            }
        )
    return documents


@pytest.mark.django_db
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods())
def test_generated_clusters_round_trip(documents):
    first_cluster = Cluster.objects.create(name=f"gen-{next(_names)}")
    import_manifests(first_cluster, NODES + documents)
    first = export_manifests(first_cluster)
    second = export_manifests(_reimport(first))
    assert first == second
    for doc in documents:
        stored = Pod.objects.get(cluster=first_cluster, name=doc["metadata"]["name"])
        written = doc["spec"]["containers"][0]["resources"]["requests"]
        assert set(stored.requests) == set(written)
        for name, text in written.items():
            assert stored.requests[name] == int(text.rstrip("m"))


def _reimport(documents):
    cluster = Cluster.objects.create(name=f"gen-{next(_names)}")
    import_manifests(cluster, documents)
    return cluster
