"""One engine state per cluster and change position (`koordweb.engine.reads`).

The kept state must answer as a cold one would: the same offer slots and allocation, and a fresh
answer as soon as the cluster changes (a pod bound, a node cordoned, a card failing, a pod
deleted, a topology layer edited), never another cluster's. The cold answer is built here from
the round's own snapshot and the engine's `EngineState`, not through the cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import pytest
from django.utils import timezone

from koordweb.engine import reads
from koordweb.engine.assembly import build_for_round
from koordweb.engine.feasibility import ClusterRoom
from koordweb.engine.profile import engine_profile
from koordweb.models import Cluster, Device, Node, Pod, PodPhase, TopologyLayer
from koordweb.selectors.topology import topology_tree
from scheduler.api import EngineState, PodTemplate
from scheduler.devices.quantity import to_int
from tests.builders import ClusterFactory, JobFactory, PodFactory, gpu_node, topology

GPU2 = {"nvidia.com/gpu": 2, "cpu": 4000}


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    reads.reads_forget()
    yield
    reads.reads_forget()


@pytest.fixture
def cluster(transactional_db: None) -> Cluster:
    """Committed rows, as a page sees them: on PostgreSQL a change position is a transaction id,
    and rows the test's own open transaction wrote would count as changed at every question."""
    cluster = ClusterFactory(name="reads")
    topology(cluster)
    gpu_node(cluster, "a", spine="s0", block="b0")
    gpu_node(cluster, "b", spine="s0", block="b0")
    gpu_node(cluster, "c", spine="s1", block="b1")
    return cluster


def cold_slots(cluster: Cluster, requests: dict[str, int], *, empty: bool = False) -> list[int]:
    """The engine's offer slots per node (name order) on a state read just now."""
    snapshot, _ = build_for_round(cluster, now=timezone.now())
    state = EngineState(snapshot, engine_profile(cluster), empty=empty)
    return [int(s) for s in state.offer_slots(PodTemplate(requests))]


def kept_slots(cluster: Cluster, requests: dict[str, int], *, empty: bool = False) -> list[int]:
    return [
        int(s) for s in reads.cluster_read(cluster).offer_slots(PodTemplate(requests), empty=empty)
    ]


def builds(cluster: Cluster) -> int:
    return reads.builds.get(cluster.id, 0)


def bind(cluster: Cluster, node: str, requests: dict[str, int]) -> Pod:
    job = JobFactory(cluster=cluster, total_number=1, min_available=1)
    return PodFactory(
        job=job,
        requests=requests,
        node=Node.objects.get(cluster=cluster, name=node),
        phase=PodPhase.RUNNING,
    )


def test_the_kept_answer_is_the_cold_answer_and_is_built_once(cluster: Cluster) -> None:
    bind(cluster, "a", {"nvidia.com/gpu": 6, "cpu": 8000})
    first = topology_tree(cluster, shape=GPU2)
    second = topology_tree(cluster, shape=GPU2)
    assert builds(cluster) == 1
    assert kept_slots(cluster, GPU2) == cold_slots(cluster, GPU2) == [1, 4, 4]
    assert kept_slots(cluster, GPU2, empty=True) == cold_slots(cluster, GPU2, empty=True)
    assert builds(cluster) == 1
    for key, domain in first.domains.items():
        assert (domain.slots, domain.allocated) == (
            second.domains[key].slots,
            second.domains[key].allocated,
        )
    assert first.domains["BlockLayer/b0"].slots == 5
    assert first.domains["BlockLayer/b0"].allocated["nvidia.com/gpu"] == 6


def test_feasibility_what_would_help_and_the_topology_page_share_one_state(
    cluster: Cluster,
) -> None:
    # A what-if asks feasibility (empty), "what would help" (live) and the page's figure.
    one, two = ClusterRoom(cluster), ClusterRoom(cluster)
    assert one.empty is two.empty
    assert one.live is two.live
    topology_tree(cluster)
    assert one.room(GPU2, None, empty=True) == two.room(GPU2, None, empty=True)
    assert builds(cluster) == 2  # the live read, and the nodes-only one for the empty questions


def test_the_empty_cluster_read_ignores_pods_and_jobs_but_not_nodes(cluster: Cluster) -> None:
    first = bind(cluster, "a", {"nvidia.com/gpu": 6, "cpu": 8000})
    nodes_only = reads.cluster_read(cluster, nodes_only=True)
    empty = [int(s) for s in nodes_only.offer_slots(PodTemplate(GPU2), empty=True)]
    assert empty == cold_slots(cluster, GPU2, empty=True) == [4, 4, 4]
    # A tenant's jobs come and go: the empty cluster is the same, nothing is read again.
    PodFactory(
        job=first.job,
        requests={"nvidia.com/gpu": 8, "cpu": 8000},
        node=Node.objects.get(cluster=cluster, name="b"),
        phase=PodPhase.RUNNING,
    )
    assert reads.cluster_read(cluster, nodes_only=True) is nodes_only
    assert reads.cluster_read(cluster) is not reads.cluster_read(cluster, nodes_only=True)
    # A node cordoned changes the empty cluster too.
    Node.objects.filter(cluster=cluster, name="c").update(unschedulable=True)
    again = reads.cluster_read(cluster, nodes_only=True)
    assert again is not nodes_only
    assert [int(s) for s in again.offer_slots(PodTemplate(GPU2), empty=True)] == [4, 4, 0]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda c: bind(c, "c", {"nvidia.com/gpu": 8}), id="a pod bound"),
        pytest.param(
            lambda c: Node.objects.filter(cluster=c, name="c").update(unschedulable=True),
            id="a node cordoned",
        ),
        pytest.param(
            lambda c: Device.objects.filter(node__cluster=c, node__name="c", minor__lt=4).update(
                health=False
            ),
            id="cards failing",
        ),
    ],
)
def test_a_change_in_the_cluster_gives_a_fresh_answer(cluster: Cluster, change: object) -> None:
    before = kept_slots(cluster, GPU2)
    assert before == [4, 4, 4]
    change(cluster)  # type: ignore[operator]
    after = kept_slots(cluster, GPU2)
    assert after == cold_slots(cluster, GPU2)
    assert after != before
    assert builds(cluster) == 2


def test_a_pod_deleted_and_a_layer_edited_give_fresh_answers(cluster: Cluster) -> None:
    pod = bind(cluster, "b", {"nvidia.com/gpu": 8})
    assert kept_slots(cluster, GPU2) == [4, 0, 4]
    pod.delete()
    assert kept_slots(cluster, GPU2) == [4, 4, 4]
    assert builds(cluster) == 2
    TopologyLayer.objects.filter(cluster=cluster, name="SpineLayer").update(label_keys=["x"])
    layers = topology_tree(cluster).layers
    assert builds(cluster) == 3
    assert layers == list(reads.cluster_read(cluster).live().tree.layers)


def test_an_old_state_is_read_again(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    kept_slots(cluster, GPU2)
    monkeypatch.setattr(reads, "MAX_AGE_SECONDS", 0.0)
    kept_slots(cluster, GPU2)
    assert builds(cluster) == 2


def test_two_clusters_do_not_share(cluster: Cluster) -> None:
    other = ClusterFactory(name="other")
    gpu_node(other, "a", block="b0", cards=4)
    assert kept_slots(cluster, GPU2) == [4, 4, 4]
    assert kept_slots(other, GPU2) == [2]
    assert reads.cluster_read(other).live() is not reads.cluster_read(cluster).live()
    # A change in one cluster rebuilds that one only.
    Node.objects.filter(cluster=other).update(unschedulable=True)
    assert kept_slots(other, GPU2) == cold_slots(other, GPU2) == [0]
    assert kept_slots(cluster, GPU2) == [4, 4, 4]
    assert (builds(cluster), builds(other)) == (1, 2)


# --- quantities: the integer fast path gives what exact fractions give ------------------------
SCALE = {
    "": 1,
    "m": Fraction(1, 1000),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def exact(number: str, suffix: str) -> int:
    """The amount rounded up, by exact fractions (the parser's rule, computed another way)."""
    amount = Fraction(number) * SCALE[suffix]
    return -(-amount.numerator // amount.denominator)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5", 2),
        ("250m", 1),
        ("1Gi", 2**30),
        ("0.5Ki", 512),
        ("16Gi", 16 * 2**30),
        ("100", 100),
        ("0", 0),
        ("1001m", 2),
        ("1000m", 1),
        (".5", 1),
        ("1.", 1),
        ("0.0001", 1),
        ("2.25Mi", 2359296),
        ("1.0000000001G", 1000000001),
        (" 8 ", 8),
    ],
)
def test_quantities_in_whole_units(text: str, expected: int) -> None:
    assert to_int(text) == expected
    assert to_int(text) == expected  # remembered: the same answer


@pytest.mark.parametrize("text", ["1e3", "-1", "1.5.2", "", "Gi", "1 Gi", "1gi"])
def test_what_is_not_a_quantity_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        to_int(text)


@pytest.mark.parametrize("number", ["0", "1", "7", "1.5", "0.25", "3.999", "12.0625", ".001"])
@pytest.mark.parametrize("suffix", sorted(SCALE))
def test_every_suffix_agrees_with_exact_fractions(number: str, suffix: str) -> None:
    assert to_int(number + suffix) == exact(number, suffix)


def test_non_strings_keep_their_rules() -> None:
    assert to_int(5) == 5
    assert to_int(2.0) == 2
    for bad in (True, -1, 1.5, None):
        with pytest.raises(ValueError):
            to_int(bad)
