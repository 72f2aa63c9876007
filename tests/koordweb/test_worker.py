"""A real Celery worker (celery.contrib.testing) on the configured broker runs rounds.

In CI the broker is Redis and the database PostgreSQL; locally the embedded defaults. The cluster
behind the worker is the fake API server, reached through the kubernetes client and a kubeconfig.
"""

from __future__ import annotations

import pytest
from celery.contrib.testing.worker import start_worker

from koordweb.backends import kubernetes as kube_backend
from koordweb.celery import app
from koordweb.models import Cluster, Job, JobState, Preemption, Round
from koordweb.services.rounds import round_request
from tests.fakekube.testing import LAYOUT, eventually, gang_pods, seed_blocks
from tests.koordweb.kube_helpers import caught_up, running_pod


def _finished_rounds(cluster: Cluster) -> list[Round]:
    # A round's row appears when its plan commits and is final once the plan is enacted.
    return list(cluster.rounds.exclude(state=Round.State.RUNNING).order_by("id"))


def _wait_rounds(cluster: Cluster, count: int, timeout: float = 60) -> list[Round]:
    eventually(lambda: len(_finished_rounds(cluster)) >= count, timeout=timeout)
    return _finished_rounds(cluster)


def _worker_caught_up() -> bool:
    """The worker's watch mirror has seen every eviction through to the pod's deletion."""
    clients = list(kube_backend._clients.values())
    return bool(clients) and all(caught_up(c) for c in clients)


@pytest.mark.django_db(transaction=True)
def test_worker_rounds_bind_gangs_whole_and_preempt_through_evictions(
    kube, settings, tmp_path, celery_queue
):
    seed_blocks(kube)
    kube.add(running_pod("low-1", "node-1", 1))
    kube.add(running_pod("low-3", "node-3", 1))
    for pod in gang_pods("pair", 2, 500) + gang_pods("big", 3, 500):
        kube.add(pod)
    settings.KUBECONFIG = str(kube.write_kubeconfig(tmp_path / "kubeconfig"))
    kube_backend._clients.clear()
    cluster = Cluster.objects.create(name="k8s", backend=Cluster.Backend.KUBERNETES)
    try:
        with start_worker(
            app, pool="solo", perform_ping_check=False, shutdown_timeout=30, queues=[celery_queue]
        ):
            from koordweb.tasks import run_round

            run_round.delay(cluster.id, "manual")
            first = _wait_rounds(cluster, 1)[-1]
            assert first.state == Round.State.SUCCEEDED, first.error
            # "pair" needs a whole block: b1 and b2 each hold one low pod, so it preempts.
            assert Preemption.objects.filter(preemptor__name="pair").exists()
            assert Job.objects.get(name="big").state == JobState.PENDING
            eventually(_worker_caught_up, timeout=30)  # it sees the eviction
            run_round.delay(cluster.id, "manual")
            _wait_rounds(cluster, 2)
        pair = [kube.pod("ml", f"pair-{i}")["spec"].get("nodeName") for i in range(2)]
        big = [kube.pod("ml", f"big-{i}")["spec"].get("nodeName") for i in range(3)]
        assert None not in pair and len({LAYOUT[n] for n in pair}) == 1
        assert big == [None, None, None]  # 3 pods never fit a 2-node block: nothing partial
    finally:
        for client in kube_backend._clients.values():
            client.close()
        kube_backend._clients.clear()


@pytest.mark.django_db(transaction=True)
def test_round_requests_after_commit_are_collapsed(settings, celery_queue):
    from django.core.cache import cache
    from django.db import transaction

    from koordweb.tasks import run_round

    cluster = Cluster.objects.create(name="collapse")
    barrier = Cluster.objects.create(name="barrier")
    marker = f"round-requested:{cluster.id}"
    cache.delete(marker)
    with transaction.atomic():
        for _ in range(5):
            round_request(cluster_id=cluster.id, trigger="submit")
        assert cache.get(marker) is None  # nothing enqueued before the commit
    assert cache.get(marker) == "submit"  # enqueued once the transaction committed
    # The worker starts after the burst: a round that started between two of the burst's
    # after-commit callbacks would let the next one enqueue again.
    with start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=30, queues=[celery_queue]
    ):
        rounds = _wait_rounds(cluster, 1)
        # One worker takes tasks in order: once a round asked for after the burst has run, every
        # round the burst enqueued has run too.
        run_round.delay(barrier.id, "manual")
        _wait_rounds(barrier, 1)
    assert len(rounds) == 1 and cluster.rounds.count() == 1
    assert rounds[0].trigger == "submit"
