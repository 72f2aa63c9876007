"""5xx answers and dropped connections while a round enacts: retried, nothing lost, nothing twice.

The round is `koordweb.tasks.run_round` itself (called in this process) on the kubernetes backend,
reaching the in-thread fake API server through a kubeconfig; the process's client is built with a
fast retry policy so the test does not wait for production backoff.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from koordweb.backends import kubernetes as kube_backend
from koordweb.backends.kube import KubeClusterClient, RetryPolicy
from koordweb.models import Cluster, Job, JobState, Pod, Round
from koordweb.tasks import run_round
from tests.fakekube import FakeKube
from tests.fakekube.testing import eventually
from tests.reliability.cluster import (
    database_disagreements,
    gang,
    gang_blocks,
    kubeconfig_write,
    our_pods,
    partly_bound_gangs,
    successful_bindings,
)


@pytest.fixture
def client(kube, settings, tmp_path) -> Iterator[KubeClusterClient]:
    """The process's client for the fake, as `backend_for` will find it."""
    settings.KUBECONFIG = str(kubeconfig_write(tmp_path / "kubeconfig", kube.url))
    retry = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05)
    made = KubeClusterClient.from_kubeconfig(
        settings.KUBECONFIG, scheduler_name="koordweb", retry=retry, watch_timeout=2
    )
    kube_backend._clients.clear()
    kube_backend._clients[f"{settings.KUBECONFIG}|koordweb"] = made
    yield made
    made.close()
    kube_backend._clients.clear()


@pytest.fixture
def cluster(db) -> Cluster:
    return Cluster.objects.create(name="faulty", backend=Cluster.Backend.KUBERNETES)


def mirror_caught_up(kube: FakeKube, client: KubeClusterClient) -> None:
    want = our_pods(kube)

    def seen() -> bool:
        have = {
            f"{d['metadata']['namespace']}/{d['metadata']['name']}": d["spec"].get("nodeName")
            for d in client.snapshot()
            if d.get("kind") == "Pod" and d["spec"].get("schedulerName") == "koordweb"
        }
        return have == want

    eventually(seen, timeout=10)


def test_5xx_and_dropped_connections_during_enact_are_retried(kube, client, cluster):
    for pod in gang("alpha", 3) + gang("beta", 2):
        kube.add(pod)
    mirror_caught_up(kube, client)
    binding = r"/pods/alpha-0/binding$"
    kube.faults.add(path=binding, method="POST", status=503, count=2)
    # (the read of a pod before its binding is skipped when the mirror has it: the faults are on
    # the bindings themselves)
    kube.faults.add(path=r"/pods/alpha-1/binding$", method="POST", drop=True)  # never arrived
    kube.faults.add(path=r"/pods/alpha-2/binding$", method="POST", drop_after=True)  # bound, lost
    kube.faults.add(path=r"/pods/beta-0/binding$", method="POST", status=500)
    kube.faults.add(path=r"/pods/beta-1/binding$", method="POST", status=429)

    summary = run_round(cluster.id, "manual")

    rnd = Round.objects.get(id=summary["round"])
    assert rnd.state == Round.State.SUCCEEDED and rnd.pods_bound == 5
    assert not kube.faults.faults, "every armed fault fired"
    assert None not in our_pods(kube).values()
    assert {g: len(b) for g, b in gang_blocks(kube).items()} == {"alpha": 1, "beta": 1}
    # alpha-2's first binding was processed and its answer lost (logged without a status): the
    # retry found it bound to the same node (409), so no pod's binding was answered 2xx twice.
    accepted = successful_bindings(kube)
    assert set(accepted.values()) == {1}
    assert set(accepted) == {"ml/alpha-0", "ml/alpha-1", "ml/beta-0", "ml/beta-1"}
    answers = [r.status for r in kube.faults.requests_to(r"/pods/alpha-2/binding$", "POST")]
    assert answers[0] is None and answers[1] == 409
    assert database_disagreements(kube, cluster) == {}
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.SCHEDULED}


def test_a_round_that_runs_out_of_retries_fails_whole_and_the_next_one_finishes(
    kube, client, cluster
):
    for pod in gang("alpha", 3):
        kube.add(pod)
    mirror_caught_up(kube, client)
    # alpha-0 binds; alpha-1 keeps failing beyond the retry budget: the round fails mid-gang.
    kube.faults.add(path=r"/pods/alpha-1/binding$", method="POST", status=503, count=4)
    with pytest.raises(Exception, match="gave up after 4 attempts"):
        run_round(cluster.id, "manual")
    failed = Round.objects.get()
    assert failed.state == Round.State.FAILED and "503" in failed.error
    # The plan committed, but no outcome of the failed chunk was recorded: the database still has
    # the whole gang pending, and its intents wait for the next round.
    assert Pod.objects.filter(cluster=cluster, node__isnull=False).count() == 0
    # the others were bound in parallel meanwhile: the gang is partly bound
    [(bound, total)] = partly_bound_gangs(kube).values()
    assert total == 3 and 1 <= bound < 3

    mirror_caught_up(kube, client)
    summary = run_round(cluster.id, "manual")
    assert Round.objects.get(id=summary["round"]).state == Round.State.SUCCEEDED
    assert partly_bound_gangs(kube) == {}
    assert None not in our_pods(kube).values()
    assert len(gang_blocks(kube)["alpha"]) == 1
    assert set(successful_bindings(kube).values()) == {1}
    mirror_caught_up(kube, client)
    run_round(cluster.id, "manual")  # the database follows the cluster
    assert database_disagreements(kube, cluster) == {}
    assert Job.objects.get(name="alpha").state == JobState.RUNNING
