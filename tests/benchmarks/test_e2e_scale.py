"""The end-to-end scale benchmark at a tiny size: rounds through a real (in-process) Celery worker
on the configured database and broker, with the Round rows' timings read back."""

from __future__ import annotations

import json

import pytest
from celery.contrib.testing.worker import start_worker

from benchmarks import e2e_scale
from benchmarks.common import write_json
from koordweb.celery import app
from koordweb.models import Cluster, Job, JobState, Pod

ROUND_KEYS = {
    "state",
    "error",
    "pods_bound",
    "jobs_placed",
    "engine_ms",
    "duration_ms",
    "sync_snapshot_ms",
    "record_enact_ms",
    "wall_ms",
    "snapshot",
    "changed_rows",
    "cpu_ms",
}


@pytest.mark.django_db(transaction=True)
def test_cluster_rows_fill_the_idle_half() -> None:
    cluster = e2e_scale.build_cluster("bench-rows", nodes=32, pending_pods=32)
    assert cluster.nodes.count() == 32
    busy = Pod.objects.filter(cluster=cluster, node__isnull=False)
    assert busy.count() == 16  # half the nodes hold one 8-GPU pod
    pending = Pod.objects.filter(cluster=cluster, node__isnull=True)
    assert sum(p.requests["nvidia.com/gpu"] for p in pending) == 16 * 8
    assert Job.objects.filter(cluster=cluster, state=JobState.PENDING).exists()
    # building again replaces the cluster rather than failing on unique names
    again = e2e_scale.build_cluster("bench-rows", nodes=16, pending_pods=8)
    assert Cluster.objects.filter(name="bench-rows").count() == 1
    assert again.nodes.count() == 16


@pytest.mark.django_db(transaction=True)
def test_e2e_scale_rounds_through_a_worker(tmp_path) -> None:
    # a queue of its own so no other worker on a shared broker takes the rounds; a fixed name
    # (the filesystem broker leaves one exchange file a queue name behind)
    queue = "koordweb-bench-test"
    with start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=30, queues=[queue]
    ):
        report = e2e_scale.run(
            [48], rounds=2, timeout=60, cprofile=True, send=e2e_scale.send_round(queue)
        )
    path = tmp_path / "e2e.json"
    write_json(str(path), report)
    report = json.loads(path.read_text())
    assert report["benchmark"] == "e2e_scale"
    (run,) = report["runs"]
    assert run["nodes"] == 48
    assert len(run["rounds"]) == 2
    for rnd in run["rounds"]:
        assert set(rnd) == ROUND_KEYS
        assert rnd["state"] == "succeeded", rnd["error"]
        assert rnd["engine_ms"] is not None and rnd["wall_ms"] >= rnd["duration_ms"] >= 0
    # the first round binds every pending pod (they exactly fill the idle half), the second none
    assert run["rounds"][0]["pods_bound"] == 48
    assert run["rounds"][1]["pods_bound"] == 0
    assert run["cold_pods_bound"] == 48 and run["cold_pods_per_s_end_to_end"] > 0
    # then every gang pod finished and a new wave of 48 arrived at the warm worker
    arrival = run["arrival_round"]
    assert set(arrival) == ROUND_KEYS and arrival["state"] == "succeeded", arrival["error"]
    assert arrival["snapshot"] == "warm" and arrival["changed_rows"] >= 48
    assert run["pods_bound"] == arrival["pods_bound"] == 48
    assert run["pods_per_s_end_to_end"] > 0
    profile = run["cprofile"]
    assert profile["queries"] > 0
    assert any("round_execute" in f["function"] for f in profile["functions"])
    assert run["rounds"][0]["snapshot"] == "cold"  # a cluster new to the worker
    # nothing changed in the steady rounds: the warm snapshot read no row and the engine's
    # answer was kept; the round after 100 pods changed read them and bound the new ones
    assert all(r["changed_rows"] == 0 for r in run["steady_rounds"])
    assert run["steady_round_ms"] >= 0 and "steady_round_ms" in run["normalised"]
    assert run["changes_round"]["changed_rows"] >= 100
    assert run["changes_round"]["pods_bound"] == 50
    assert run["normalised"]["pods_per_s_end_to_end"] > 0 and report["reference_loop_s"] > 0
    assert any("round_execute" in f["function"] for f in run["cprofile_steady"]["functions"])
    assert not Cluster.objects.filter(name="bench-e2e-48").exists()  # cleaned up
    assert "| 48 |" in e2e_scale.markdown(report)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "x"], "--nodes: expected a comma list of positive node counts"),
        (["--nodes", "100", "--rounds", "0"], "--rounds must be at least 1"),
    ],
)
def test_bad_arguments_exit_2_before_touching_the_database(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        e2e_scale.main(args)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.django_db
def test_a_migrated_database_lacks_no_migration() -> None:
    assert e2e_scale.unapplied_migrations() == 0
