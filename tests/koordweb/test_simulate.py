"""`manage.py simulate` on every scenario file under tests/scenarios/, and on bad input.

Each `<name>.yaml` has a `<name>.expected.json` beside it holding what must hold of the output:
- "final": the exact pod -> node map after the last round;
- "preemptions": every victim pod over all rounds (order does not matter);
- "unschedulable": the job ids still unschedulable in the last round;
- "annotations": {pod: {key: value}} that the placing round wrote;
- "devices": {pod: {type: [minors]}} the cards the placing round chose;
- "reasons": {job: text} text that a round's reason (or its details) for that unschedulable job
  contains (Koordinator's own reason, for scenarios taken from its unit tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from koordweb.models import Cluster, Job, Node, Pod

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
CASES = sorted(SCENARIOS.glob("*.yaml"))


def simulate(path: Path, *args: str) -> dict:
    out = StringIO()
    call_command("simulate", str(path), *args, stdout=out)
    return json.loads(out.getvalue())


def _placed(output: dict) -> dict[str, dict]:
    placed: dict[str, dict] = {}
    for rnd in output["rounds"]:
        placed.update(rnd["placements"])
    return placed


@pytest.mark.django_db
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_scenario(path: Path) -> None:
    expected = json.loads(path.with_suffix(".expected.json").read_text())
    output = simulate(path)
    if "final" in expected:
        assert output["final"] == expected["final"]
    if "preemptions" in expected:
        victims = sorted(
            v for rnd in output["rounds"] for p in rnd["preemptions"] for v in p["victims"]
        )
        assert victims == sorted(expected["preemptions"])
    if "unschedulable" in expected:
        assert sorted(output["rounds"][-1]["unschedulable"]) == sorted(expected["unschedulable"])
    for job, text in expected.get("reasons", {}).items():
        verdicts = [r["unschedulable"][job] for r in output["rounds"] if job in r["unschedulable"]]
        said = [v["reason"] + " " + json.dumps(v["details"]) for v in verdicts]
        assert any(text in words for words in said), (job, said)
    placed = _placed(output)
    for pod, wanted in expected.get("annotations", {}).items():
        for key, value in wanted.items():
            assert placed[pod]["annotations"].get(key) == value, (pod, key)
    for pod, devices in expected.get("devices", {}).items():
        chosen = {
            kind: sorted(entry["minor"] for entry in entries)
            for kind, entries in placed[pod]["devices"].items()
        }
        assert chosen == {k: sorted(v) for k, v in devices.items()}, pod
    # Nothing is kept: the scratch cluster lived in a private database.
    assert not Cluster.objects.exists()
    assert not Node.objects.exists() and not Pod.objects.exists() and not Job.objects.exists()


@pytest.mark.django_db
def test_output_shape_and_determinism() -> None:
    if not CASES:
        pytest.skip("no scenario files yet")
    first = simulate(CASES[0])
    assert set(first) == {"rounds", "final"}
    for rnd in first["rounds"]:
        assert set(rnd) == {"placements", "preemptions", "unschedulable"}
    assert simulate(CASES[0]) == first


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Node\napiVersion: v1\nmetadata: {name: a}\n: : :\n", "document"),
        ("apiVersion: v1\nkind: Gadget\nmetadata: {name: x}\n", "Gadget"),
        ("a: &x [1]\nb: *x\n", "anchors are not allowed"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CommandError) as caught:
        simulate(path)
    assert caught.value.returncode == 2
    assert message.lower() in str(caught.value).lower()
    assert "\n" not in str(caught.value)
    assert not Cluster.objects.exists()


def test_missing_file_exits_2_from_the_command_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "simulate", str(tmp_path / "nope.yaml")],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "SECRET_KEY": "cli-test-" + "k" * 40},
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "nope.yaml" in done.stderr


def _production_env() -> dict[str, str]:
    """The environment of a clean checkout with production defaults: DEBUG off, no SECRET_KEY
    (set but empty, so a developer's .env cannot fill them)."""
    settings = "koordweb.settings.production"
    return {**os.environ, "SECRET_KEY": "", "DEBUG": "false", "DJANGO_SETTINGS_MODULE": settings}


def test_simulate_needs_no_secret_key(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "simulate", str(CASES[0])],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**_production_env(), "DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == {"rounds", "final"}


def test_settings_that_cannot_start_exit_2_with_one_line(tmp_path: Path) -> None:
    # A command that uses the configured database (and so could serve sessions) still refuses.
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--check"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**_production_env(), "DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}"},
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "SECRET_KEY must be set" in done.stderr
    assert not (tmp_path / "unused.sqlite3").exists()


def test_runs_without_a_migrated_database(tmp_path: Path) -> None:
    database = tmp_path / "never-migrated.sqlite3"
    done = subprocess.run(
        [sys.executable, "manage.py", "simulate", str(CASES[0])],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={
            **os.environ,
            "SECRET_KEY": "cli-test-" + "k" * 40,
            "DATABASE_URL": f"sqlite:///{database}",
        },
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == {"rounds", "final"}
    # The configured database was never opened: no file, so no schema and no rows.
    assert not database.exists()


def _t8_gang_beside_a_half_used_node(tmp_path: Path) -> Path:
    """T8's nodes and topology, 8 CPU used on node-1, and a MustGather-Block gang of 5 x 4 CPU."""
    import yaml

    base = yaml.safe_load_all((SCENARIOS / "topology_t8_must_gather_block.yaml").read_text())
    docs = [d for d in base if d["kind"] in ("Node", "ClusterNetworkTopology")]

    def pod(name: str, cpu: str, **spec: str) -> dict:
        labels = {} if spec else {"pod-group.scheduling.sigs.k8s.io": "job"}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {
                "schedulerName": "koordweb",
                "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}],
                **spec,
            },
            **({"status": {"phase": "Running"}} if spec else {}),
        }

    rule = '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]}'
    docs.append(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": "job",
                "namespace": "default",
                "annotations": {"gang.scheduling.koordinator.sh/network-topology-spec": rule},
            },
            "spec": {"minMember": 5},
        }
    )
    docs.append(pod("used", "8", nodeName="node-1"))
    docs.extend(pod(f"pod-{i}", "4") for i in range(1, 6))
    path = tmp_path / "half-used.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


@pytest.mark.django_db
def test_scheduler_args_change_the_simulated_placement(tmp_path: Path) -> None:
    path = _t8_gang_beside_a_half_used_node(tmp_path)
    reference = simulate(path, "--scheduler-args", '{"NetworkTopology": {"bestFit": false}}')[
        "final"
    ]
    fitted = simulate(path)["final"]  # bestFit is on by default (issue #39)
    gang = [f"default/pod-{i}" for i in range(1, 6)]
    assert [reference[p] for p in gang] == ["node-8"] * 4 + ["node-1"]
    assert [fitted[p] for p in gang] == ["node-1"] * 2 + ["node-8"] * 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{nope", "--scheduler-args: not JSON"),
        ('{"NetworkTopology": {"bestFit": 1}}', "NetworkTopology.bestFit: expected true or false"),
        ("[]", "expected an object of plugin name -> arguments"),
    ],
)
def test_bad_scheduler_args_exit_2_with_one_line(value: str, message: str) -> None:
    with pytest.raises(CommandError) as caught:
        simulate(CASES[0], "--scheduler-args", value)
    assert caught.value.returncode == 2
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert not Cluster.objects.exists()
