"""Objects read as Koordinator v1.7 reads them, where it falls back rather than refusing: gang
settings (coscheduling `tryInitByPodGroup`, `tryInitByPodConfig`, `GetWaitTimeDuration`; a
PodGroup's mode and total-number annotations count, a PodGroup gang's topology rule is the
PodGroup's alone), lightweight coscheduling labels, a pod's quota (`GetQuotaName`), quota tree
labels, the topology index and a Device's health (the CRD's default, false). A value Koordinator
cannot use falls back to its default with a warning instead of refusing the document."""

from __future__ import annotations

import json

import pytest

from koordweb.manifests import apply_manifests, dump_manifests, export_manifests, parse_manifests
from koordweb.models import Cluster, Job
from scheduler.durations import go_duration_seconds
from scheduler.vocabulary import DEFAULT_WAITING_SECONDS

pytestmark = pytest.mark.django_db

GANG = "gang.scheduling.koordinator.sh"


def pod(name: str, annotations: dict[str, str], labels: dict[str, str] | None = None) -> str:
    meta = {"name": name, "namespace": "train", "annotations": annotations, "labels": labels or {}}
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {json.dumps(meta)}\n"
        'spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}'
    )


def pod_group(name: str, spec: str, annotations: dict[str, str] | None = None) -> str:
    meta = {"name": name, "namespace": "train", "annotations": annotations or {}}
    return (
        f"apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\n"
        f"metadata: {json.dumps(meta)}\nspec: {spec}"
    )


def member(name: str, group: str, annotations: dict[str, str] | None = None) -> str:
    return pod(name, annotations or {}, {"pod-group.scheduling.sigs.k8s.io": group})


def imported(*documents: str) -> tuple[dict[str, Job], list[str]]:
    manifests = parse_manifests("\n---\n".join(documents))
    apply_manifests(Cluster.objects.get_or_create(name="koord")[0], manifests)
    return {job.name: job for job in Job.objects.all()}, manifests.warnings


def test_a_podgroups_mode_and_total_number_annotations_count():
    group = pod_group(
        "ns", "{minMember: 2}", {f"{GANG}/mode": "NonStrict", f"{GANG}/total-number": "4"}
    )
    jobs, warnings = imported(group, member("ns-0", "ns"), member("ns-1", "ns"))
    assert (jobs["ns"].mode, jobs["ns"].min_available, jobs["ns"].total_number) == (
        "NonStrict",
        2,
        4,
    )
    assert warnings == []
    # Exported and read back: the same settings (the PodGroup carries them as annotations).
    again = parse_manifests(dump_manifests(export_manifests(Cluster.objects.get(name="koord"))))
    plan = next(p for p in again.jobs if p.name == "ns")
    assert (plan.values["mode"], plan.values["total_number"]) == ("NonStrict", 4)


@pytest.mark.parametrize(
    ("written", "seconds", "warned"),
    [
        ("1h30m", 5400, False),
        ("500ms", 1, False),  # rounded up: 0 would mean "never"
        ("0s", DEFAULT_WAITING_SECONDS, False),  # Koordinator: 0 is the default
        ("30", DEFAULT_WAITING_SECONDS, True),  # no unit: Go refuses it
        ("-10s", DEFAULT_WAITING_SECONDS, True),
        ("soon", DEFAULT_WAITING_SECONDS, True),
    ],
)
def test_an_annotation_gangs_waiting_time(written: str, seconds: int, warned: bool):
    annotations = {
        f"{GANG}/name": "g",
        f"{GANG}/min-available": "1",
        f"{GANG}/waiting-time": written,
    }
    jobs, warnings = imported(pod("g-0", annotations))
    assert jobs["g"].waiting_time_seconds == seconds
    assert bool(warnings) is warned
    if warned:
        assert "waiting-time" in warnings[0] and "600 s" in warnings[0]


@pytest.mark.parametrize("timeout", ["0", "-5"])
def test_a_podgroup_timeout_not_positive_is_the_default(timeout: str):
    jobs, warnings = imported(
        pod_group("pg", f"{{minMember: 1, scheduleTimeoutSeconds: {timeout}}}"),
        member("pg-0", "pg"),
    )
    assert jobs["pg"].waiting_time_seconds == DEFAULT_WAITING_SECONDS
    assert len(warnings) == 1 and "scheduleTimeoutSeconds" in warnings[0]


def test_what_koordinator_cannot_use_falls_back_with_a_warning():
    annotations = {
        f"{GANG}/name": "g",
        f"{GANG}/min-available": "3",
        f"{GANG}/total-number": "2",  # below min-available: min-available
        f"{GANG}/mode": "strict",  # not a mode: Strict
        f"{GANG}/groups": "not json",  # the gang alone
        f"{GANG}/network-topology-spec": "{broken",  # no rule
    }
    jobs, warnings = imported(*(pod(f"g-{i}", annotations) for i in range(3)))
    job = jobs["g"]
    assert (job.mode, job.min_available, job.total_number) == ("Strict", 3, 3)
    assert (job.gang_groups, job.topology_spec, job.gang_group) == ([], {}, "train/g")
    text = "\n".join(warnings)
    for key in ("total-number", "mode", "groups", "network-topology-spec"):
        assert f"{GANG}/{key}" in text
    assert "refused" not in text


def test_a_podgroup_gangs_rule_is_the_podgroups_own():
    rule = '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]}'
    jobs, warnings = imported(
        pod_group("pg", "{minMember: 1}"),
        member("pg-0", "pg", {f"{GANG}/network-topology-spec": rule}),
    )
    assert jobs["pg"].topology_spec == {}
    assert len(warnings) == 1 and "PodGroup" in warnings[0] and "not used" in warnings[0]


def test_go_durations():
    assert go_duration_seconds("5m0s") == 300
    assert go_duration_seconds("1.5h") == 5400
    assert go_duration_seconds(".5s") == 0.5
    assert go_duration_seconds("0") == 0
    assert go_duration_seconds("2562047h") is not None
    for refused in ("", "30", "s", "1e3s", "1h-1m", "2562048h", "x" * 100):
        assert go_duration_seconds(refused) is None


@pytest.mark.parametrize(
    ("is_parent", "allow_lent", "expected", "warned"),
    [
        ("true", "false", (True, False), 0),
        ("True", "False", (False, True), 2),  # Koordinator compares exactly
        ("yes", "no", (False, True), 2),
    ],
)
def test_quota_tree_labels_are_read_as_koordinator_compares_them(
    is_parent: str, allow_lent: str, expected: tuple[bool, bool], warned: int
):
    labels = {
        "quota.scheduling.koordinator.sh/is-parent": is_parent,
        "quota.scheduling.koordinator.sh/allow-lent-resource": allow_lent,
    }
    meta = {"name": "team-a", "namespace": "team-a", "labels": labels}
    doc = (
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\n"
        f"metadata: {json.dumps(meta)}\nspec: {{min: {{cpu: 1}}, max: {{cpu: 2}}}}"
    )
    manifests = parse_manifests(doc)
    quota = manifests.objects[0]
    assert (quota.values["is_parent"], quota.values["allow_lent"]) == expected
    assert len(manifests.warnings) == warned


def quota_doc(name: str, namespace: str, annotations: dict[str, str] | None = None) -> str:
    meta = {"name": name, "namespace": namespace, "annotations": annotations or {}}
    return (
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\n"
        f"metadata: {json.dumps(meta)}\nspec: {{min: {{cpu: 1}}, max: {{cpu: 100}}}}"
    )


def lone_pod(name: str, namespace: str, labels: dict[str, str] | None = None) -> str:
    meta = {"name": name, "namespace": namespace, "labels": labels or {}}
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {json.dumps(meta)}\n"
        'spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}'
    )


def test_a_pod_without_a_quota_label_joins_its_namespaces_quota():
    """Koordinator's GetQuotaName: the quota named after the pod's namespace, then one whose
    namespaces annotation lists it, then the default quota; a label naming no quota, the
    default quota too (with a warning)."""
    listed = {"quota.scheduling.koordinator.sh/namespaces": '["research"]'}
    jobs, warnings = imported(
        quota_doc("team-a", "team-a"),
        quota_doc("team-b", "team-b", listed),
        quota_doc("koordinator-default-quota", "koordinator-system"),
        lone_pod("a", "team-a"),
        lone_pod("r", "research"),
        lone_pod("x", "elsewhere"),
        lone_pod("typo", "team-a", {"quota.scheduling.koordinator.sh/name": "team-aa"}),
    )
    quota = {name: job.quota.name if job.quota else None for name, job in jobs.items()}
    assert quota == {
        "a": "team-a",
        "r": "team-b",
        "x": "koordinator-default-quota",
        "typo": "koordinator-default-quota",
    }
    assert len(warnings) == 1 and "'team-aa'" in warnings[0]


@pytest.mark.parametrize(
    ("written", "index", "warned"), [("3", 3, 0), ("-1", None, 0), ("x", None, 1)]
)
def test_a_topology_index_koordinator_cannot_use_is_no_index(
    written: str, index: int | None, warned: int
):
    annotations = {
        f"{GANG}/name": "g",
        f"{GANG}/min-available": "1",
        f"{GANG}/network-topology-index": written,
    }
    manifests = parse_manifests(pod("g-0", annotations))
    assert manifests.objects[0].values["topology_index"] == index
    assert len(manifests.warnings) == warned


def test_lightweight_coscheduling_labels_make_a_gang():
    """Koordinator's deprecated lightweight coscheduling: pods labelled with a gang name and
    its minimum, no PodGroup object, are one gang (GetGangNameByPod, GetGangMinNumFromPod)."""
    labels = {
        "pod-group.scheduling.sigs.k8s.io/name": "lw",
        "pod-group.scheduling.sigs.k8s.io/min-available": "2",
    }
    jobs, warnings = imported(pod("lw-0", {}, labels), pod("lw-1", {}, labels))
    assert list(jobs) == ["lw"]
    job = jobs["lw"]
    assert (job.kind, job.min_available, job.total_number, job.mode) == ("gang", 2, 2, "Strict")
    assert job.pods.count() == 2 and warnings == []


def test_a_device_without_health_is_unhealthy():
    """The Device CRD defaults `health` to false (`+kubebuilder:default=false`): a card whose
    entry does not say it is healthy is not allocated."""
    node = 'apiVersion: v1\nkind: Node\nmetadata: {name: gpu-1}\nstatus: {allocatable: {cpu: "8"}}'
    device = (
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Device\nmetadata: {name: gpu-1}\n"
        "spec: {devices: [{type: gpu, minor: 0}, {type: gpu, minor: 1, health: true}]}"
    )
    manifests = parse_manifests(node + "\n---\n" + device)
    rows = next(o for o in manifests.objects if o.kind == "Device").rows
    assert [(row["minor"], row["health"]) for row in rows] == [(0, False), (1, True)]
