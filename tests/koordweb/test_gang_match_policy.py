"""A gang's match policy (`gang.scheduling.koordinator.sh/match-policy`, Koordinator's
`GetGangMatchPolicy`) read from a PodGroup or an annotation gang's pods into the engine's
GangInfo, an unknown value falling back to once-satisfied with a warning, and kept on export."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from koordweb.engine.assembly import build
from koordweb.manifests import apply_manifests, dump_manifests, export_manifests, parse_manifests
from koordweb.models import Cluster
from scheduler.vocabulary import GANG_MATCH_POLICY, LIGHTWEIGHT_GANG_MATCH_POLICY

pytestmark = pytest.mark.django_db


def _pod(name: str, annotations: dict[str, str], labels: dict[str, str] | None = None) -> str:
    meta = {"name": name, "namespace": "ml", "annotations": annotations, "labels": labels or {}}
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {json.dumps(meta)}\n"
        'spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}'
    )


def _group(name: str, annotations: dict[str, str]) -> str:
    meta = {"name": name, "namespace": "ml", "annotations": annotations}
    return (
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\n"
        f"metadata: {json.dumps(meta)}\nspec: {{minMember: 1}}"
    )


def _policies(*documents: str) -> tuple[dict[str, str], list[str]]:
    manifests = parse_manifests("\n---\n".join(documents))
    cluster = Cluster.objects.get_or_create(name="koord")[0]
    apply_manifests(cluster, manifests)
    snap, _index = build(cluster, now=datetime.now(UTC))
    gangs = {g.id: g.match_policy for job in snap.jobs for g in job.gangs}
    return gangs, manifests.warnings


def test_match_policy_of_podgroups_and_annotation_gangs_reaches_the_engine() -> None:
    member = {"pod-group.scheduling.sigs.k8s.io": "pg"}
    gang = {
        "gang.scheduling.koordinator.sh/name": "ag",
        "gang.scheduling.koordinator.sh/min-available": "1",
        GANG_MATCH_POLICY: "only-waiting",
    }
    policies, warnings = _policies(
        _group("pg", {LIGHTWEIGHT_GANG_MATCH_POLICY: "waiting-and-running"}),
        _pod("pg-0", {}, member),
        _pod("ag-0", gang),
        _group("odd", {GANG_MATCH_POLICY: "sometimes"}),
        _pod("odd-0", {}, {"pod-group.scheduling.sigs.k8s.io": "odd"}),
    )
    assert policies == {
        "ml/pg": "waiting-and-running",
        "ml/ag": "only-waiting",
        "ml/odd": "once-satisfied",
    }
    assert any(GANG_MATCH_POLICY in w and "once-satisfied" in w for w in warnings)
    again = dump_manifests(export_manifests(Cluster.objects.get(name="koord")))
    assert f"{GANG_MATCH_POLICY}: waiting-and-running" in again
