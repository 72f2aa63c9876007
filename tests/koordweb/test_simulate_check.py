"""`manage.py simulate --check`: the round oracle checks every simulated round; a round that
breaks a rule is printed in words and the command exits 1; bad input still exits 2."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from koordweb.engine import pipeline as records
from scheduler import ClusterSnapshot, Profile, RoundResult

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
TAINTED = """
apiVersion: v1
kind: Node
metadata: {name: node-a}
spec:
  taints: [{key: dedicated, value: infer, effect: NoSchedule}]
status:
  allocatable: {cpu: '8', memory: 64Gi, pods: '110'}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  schedulerName: koordweb
  containers:
  - name: main
    image: busybox
    resources: {requests: {cpu: '1'}}
"""


def run(path: Path, *args: str) -> tuple[dict[str, Any], str]:
    out, err = StringIO(), StringIO()
    call_command("simulate", str(path), "--check", *args, stdout=out, stderr=err)
    return json.loads(out.getvalue()), err.getvalue()


@pytest.mark.django_db
def test_a_valid_simulation_passes_the_check_with_no_violation() -> None:
    output, err = run(SCENARIOS / "gang_all_or_nothing.yaml")
    assert output["rounds"] and all(rnd["violations"] == [] for rnd in output["rounds"])
    assert err == ""


@pytest.mark.django_db
@pytest.mark.no_oracle  # an engine that ignores taints, planted on purpose
def test_a_round_that_breaks_a_rule_is_printed_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = records.plan_round

    def careless(snapshot: ClusterSnapshot, profile: Profile | None = None) -> RoundResult:
        return engine(snapshot, (profile or Profile.default()).without("TaintToleration"))

    monkeypatch.setattr(records, "plan_round", careless)
    manifest = tmp_path / "tainted.yaml"
    manifest.write_text(TAINTED)
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("simulate", str(manifest), "--check", stdout=out, stderr=err)
    assert caught.value.returncode == 1
    assert "1 violation(s)" in str(caught.value)
    assert err.getvalue().splitlines() == [
        "round 1: TaintToleration: default/web placed on node-a, whose taint "
        "dedicated=infer:NoSchedule it does not tolerate"
    ]
    (violation,) = json.loads(out.getvalue())["rounds"][0]["violations"]
    assert violation["rule"] == "TaintToleration" and violation["node"] == "node-a"


@pytest.mark.django_db
def test_without_check_the_output_has_no_violations_key() -> None:
    out = StringIO()
    call_command("simulate", str(SCENARIOS / "gang_all_or_nothing.yaml"), stdout=out)
    assert all("violations" not in rnd for rnd in json.loads(out.getvalue())["rounds"])


def test_bad_input_still_exits_2_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as caught:
        call_command("simulate", str(tmp_path / "missing.yaml"), "--check")
    assert caught.value.returncode == 2
    assert "\n" not in str(caught.value)
