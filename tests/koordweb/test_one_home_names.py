"""Names have one order and gang groups one id, shared by the engine, the pages and the manifests.

`natural_key` (scheduler.vocabulary) is the order the engine places pods in and the pages list
nodes and pods in: digit runs compare as numbers. `gang_group_id` (scheduler.model) is the job id
of a gang group; the manifest reader writes it on each member job, and the engine's snapshot joins
the members under it.
"""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from koordweb.engine.assembly import build_for_round
from koordweb.manifests import import_manifests
from koordweb.models import Cluster, Job
from koordweb.selectors.devices import natural_key as page_order
from scheduler.model import PodInfo, gang_group_id
from scheduler.state import placement_order
from scheduler.vocabulary import natural_key

# Names whose order trips a plain string sort, or a key that mixes up text and numbers.
NAMES = [
    "n10",
    "n2",
    "n1",
    "gpu-a-10",
    "gpu-a-1",
    "gpu-a-2",
    "gpu-b-1",
    "10n",
    "2n",
    "n",
    "n2a",
    "n2-1",
    "n-2",
    "rack1-node10",
    "rack1-node9",
    "rack10-node1",
    "a.1.10",
    "a.1.9",
]


def test_digit_runs_compare_as_numbers() -> None:
    assert sorted(["n10", "gpu-a-1", "n2", "gpu-a-10", "gpu-a-2"], key=natural_key) == [
        "gpu-a-1",
        "gpu-a-2",
        "gpu-a-10",
        "n2",
        "n10",
    ]
    assert sorted(["rack10-node1", "rack1-node10", "rack1-node9"], key=natural_key) == [
        "rack1-node9",
        "rack1-node10",
        "rack10-node1",
    ]
    # A name that starts with digits comes before any that starts with a letter; a name before
    # the same name with more after it.
    assert sorted(["n", "n2a", "2n", "n2", "10n"], key=natural_key) == [
        "2n",
        "10n",
        "n",
        "n2",
        "n2a",
    ]


def test_the_engine_places_pods_in_the_one_order() -> None:
    pods = [PodInfo("ml", name, "ml/job") for name in NAMES]
    placed = [pod.name for pod in placement_order(pods)]
    assert placed == sorted(NAMES, key=natural_key)


def test_the_pages_list_names_in_the_engine_order() -> None:
    for names in (NAMES, NAMES[::-1]):
        assert sorted(names, key=page_order) == sorted(names, key=natural_key)


def _gang_pod(name: str, gang: str, groups: list[str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "annotations": {
                "gang.scheduling.koordinator.sh/name": gang,
                "gang.scheduling.koordinator.sh/min-available": "1",
                "gang.scheduling.koordinator.sh/groups": json.dumps(groups),
            },
        },
        "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": 1}}}]
        },
        "status": {"phase": "Pending"},
    }


@pytest.mark.django_db
def test_a_gang_group_has_the_engine_id_on_every_member_and_in_the_round() -> None:
    cluster = Cluster.objects.create(name="groups")
    import_manifests(
        cluster,
        [
            # One member names only the other, one names both in another order: one group.
            _gang_pod("workers-0", "workers", ["ml/ps"]),
            _gang_pod("ps-0", "ps", ["ml/workers", "ml/ps"]),
            _gang_pod("solo-0", "solo", []),
        ],
    )
    group = gang_group_id(["ml/workers", "ml/ps"])
    jobs = dict(Job.objects.filter(cluster=cluster).values_list("name", "gang_group"))
    assert jobs == {"workers": group, "ps": group, "solo": gang_group_id(["ml/solo"])}

    snapshot, _ = build_for_round(cluster, now=timezone.now())
    by_id = {job.id: job for job in snapshot.jobs}
    assert set(by_id) == {group, "ml/solo"}
    assert sorted(g.id for g in by_id[group].gangs) == ["ml/ps", "ml/workers"]
