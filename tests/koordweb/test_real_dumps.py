"""A real cluster's dump (`kubectl get nodes,pods,... -A -o yaml`) simulates and imports as it is:
Lists unwrapped, kinds koordweb does not use skipped with one warning, koord-scheduler's own
quotas (MaxInt64/5), gang annotations Koordinator tolerates, Kubernetes' built-in priority
classes, and DaemonSet pods (matchFields, ownerReferences)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from koordweb.engine.specs import parse_required_affinity
from koordweb.kubenames import affinity_errors
from koordweb.manifests import (
    ManifestError,
    apply_manifests,
    export_manifests,
    load_documents,
    parse_documents,
    parse_manifests,
)
from koordweb.manifests.apply import pods_join
from koordweb.models import Cluster, ElasticQuota, Job, Pod, PriorityClass
from koordweb.quantity import MAX_AMOUNT, QuantityError, Unit, parse_quantity
from scheduler.model import NodeSelectorRequirement, NodeSelectorTerm

DUMP = Path(__file__).parent / "data" / "real_cluster_dump.yaml"
GANG = "gang.scheduling.koordinator.sh"
MAX_INT64_FIFTH = "1844674407370955161"  # defaults.go defaultDefaultQuotaGroupMax


def pod(name: str, *, namespace: str = "ns", **fields: object) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": namespace}
    meta.update(fields.pop("meta", {}))  # type: ignore[call-overload]
    spec: dict[str, object] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
    }
    spec.update(fields)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def node(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def gang_pod(name: str, minimum: str, gang: str = "g") -> dict[str, object]:
    return pod(name, meta={"annotations": {f"{GANG}/name": gang, f"{GANG}/min-available": minimum}})


def as_list(*items: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": list(items)}


def cluster() -> Cluster:
    return Cluster.objects.get_or_create(name="dump")[0]


# --- 1. Lists, kinds koordweb does not use, misspelt kinds ---------------------------------------
def test_a_list_is_unwrapped_and_unused_kinds_are_skipped_with_one_warning() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    root_ca = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt", "namespace": "ns"},
        "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n"},
    }
    pods = {"apiVersion": "v1", "kind": "PodList", "items": [pod("a"), pod("b")]}
    listed = as_list(node("n1"), service, event, service | {"metadata": {"name": "t"}})
    manifests = parse_documents([listed, pods, deployment, root_ca])
    assert manifests.counts() == {"Job": 2, "Node": 1, "Pod": 2}
    assert manifests.warnings == [
        "skipped 5 documents of kinds koordweb does not use: "
        "ConfigMap 1, Deployment 1, Event 1, Service 2"
    ]


def test_a_broken_item_of_a_list_names_the_list_and_the_item() -> None:
    broken = pod("a", containers=[])
    with pytest.raises(ManifestError) as error:
        parse_documents([node("n1"), as_list(node("n2"), pod("ok"), broken)])
    assert str(error.value).startswith("document 2 (items[2]): spec.containers:")


@pytest.mark.parametrize(
    ("kind", "api_version", "meant"),
    [
        ("Nod", "v1", "Node"),
        ("Podd", "v1", "Pod"),
        ("pod", "v1", "Pod"),
        ("PodGroups", "scheduling.sigs.k8s.io/v1alpha1", "PodGroup"),
    ],
)
def test_a_misspelt_kind_is_still_an_error(kind: str, api_version: str, meant: str) -> None:
    document = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
    with pytest.raises(ManifestError) as error:
        parse_documents([node("n1"), as_list(node("n2"), document)])
    assert str(error.value) == (
        f"document 2 (items[1]): kind: unknown kind {kind!r} (did you mean {meant!r}?)"
    )


def test_other_kinds_of_koordinators_groups_are_skipped() -> None:
    """A Reservation (scheduling.koordinator.sh) or a NodeSLO is Koordinator's, not a typo."""
    reservation = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "r"},
    }
    slo = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": "n"},
    }
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    found = parse_documents([reservation, slo, node])
    assert found.skipped == {"Reservation": 1, "NodeSLO": 1}


def test_a_file_of_only_kinds_koordweb_does_not_use_is_an_error() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    with pytest.raises(ManifestError, match=r"nothing here koordweb reads.*Secret"):
        parse_documents([secret])


def test_an_unknown_kind_of_the_core_api_is_a_typo() -> None:
    gadget = {"apiVersion": "v1", "kind": "Gadget", "metadata": {"name": "g"}}
    with pytest.raises(ManifestError, match="'Gadget': not a kind of the v1 API"):
        parse_documents([gadget])


# --- 2. Quantities up to Kubernetes' bounds ------------------------------------------------------
def test_koord_schedulers_quota_max_saturates_in_milli_cpu() -> None:
    """MaxInt64/5 cores is beyond int64 in milli-cores: Kubernetes' MilliValue saturates at
    MaxInt64 (`int64Amount.AsScaledInt64`); the bytes fit as they are."""
    assert parse_quantity(MAX_INT64_FIFTH, unit=Unit.MILLI) == MAX_AMOUNT
    assert parse_quantity(MAX_INT64_FIFTH, unit=Unit.BYTES) == int(MAX_INT64_FIFTH)
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity("9223372036854775808", unit=Unit.MILLI)


# --- 3. Gang annotations koord-scheduler tolerates -----------------------------------------------
@pytest.mark.django_db
def test_a_gang_takes_its_settings_from_a_member_koordinator_can_read() -> None:
    """gang.go `tryInitByPodConfig`: a pod whose min-available does not read does not initialise
    its gang; the next member that does, does (gang_cache_test.go "illegal args")."""
    manifests = parse_documents([gang_pod("a", "xxx"), gang_pod("b", "2"), gang_pod("c", "2")])
    apply_manifests(cluster(), manifests)
    job = Job.objects.get(name="g")
    assert (job.min_available, job.total_number, job.pods.count()) == (2, 3, 3)
    assert any("'xxx' is not a number Koordinator reads" in w for w in manifests.warnings)


@pytest.mark.django_db
def test_a_gang_none_of_whose_pods_reads_is_not_imported() -> None:
    """core.go `PreEnqueue`: a gang never initialised ("gang has not init") never schedules."""
    manifests = parse_documents([gang_pod("a", "xxx"), gang_pod("b", ""), pod("lone")])
    apply_manifests(cluster(), manifests)
    assert list(Pod.objects.values_list("name", flat=True)) == ["lone"]
    assert any(w.startswith("gang ns/g: none of its 2 pods") for w in manifests.warnings)


@pytest.mark.django_db
def test_min_available_zero_binds_each_member_alone() -> None:
    """A minimum of 0 is always met (PreEnqueue, Permit): each member binds as it fits."""
    manifests = parse_documents([gang_pod("a", "0"), gang_pod("b", "0")])
    apply_manifests(cluster(), manifests)
    job = Job.objects.get(name="g")
    assert (job.mode, job.min_available, job.total_number) == ("NonStrict", 1, 2)


# --- 4. Priority classes -------------------------------------------------------------------------
@pytest.mark.django_db
def test_built_in_priority_classes_need_no_object() -> None:
    critical = pod("dns", namespace="kube-system", priorityClassName="system-cluster-critical")
    node_critical = pod("proxy", namespace="kube-system", priorityClassName="system-node-critical")
    apply_manifests(cluster(), parse_documents([critical, node_critical]))
    assert dict(Pod.objects.values_list("name", "priority")) == {
        "dns": 2_000_000_000,
        "proxy": 2_000_001_000,
    }
    assert PriorityClass.objects.get(name="system-cluster-critical").value == 2_000_000_000


@pytest.mark.django_db
def test_an_unknown_class_with_a_priority_keeps_the_priority() -> None:
    manifests = parse_documents([pod("p", priorityClassName="gone", priority=500)])
    apply_manifests(cluster(), manifests)
    stored = Pod.objects.get(name="p")
    assert (stored.priority, stored.priority_class_name) == (500, "gone")
    assert any("no PriorityClass 'gone'" in warning for warning in manifests.warnings)
    with pytest.raises(ManifestError, match="unknown PriorityClass 'gone'"):
        apply_manifests(cluster(), parse_documents([pod("q", priorityClassName="gone")]))


@pytest.mark.django_db
def test_a_late_gang_member_joins_with_its_priority_class() -> None:
    """pods_join (the sync's late members) reads the cluster's priority classes."""
    low = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "low"},
        "value": 10,
    }
    member = gang_pod("a", "1")
    member["spec"]["priorityClassName"] = "low"  # type: ignore[index]
    apply_manifests(cluster(), parse_documents([low, member]))
    late = gang_pod("b", "1")
    late["spec"]["priorityClassName"] = "low"  # type: ignore[index]
    (parsed,) = parse_documents([late]).of_kind("Pod")
    pods_join(cluster(), [(parsed, Job.objects.get(name="g"))])
    assert dict(Pod.objects.values_list("name", "priority")) == {"a": 10, "b": 10}


# --- 5. DaemonSet pods ---------------------------------------------------------------------------
def test_matchfields_are_read_as_the_api_server_allows() -> None:
    def affinity(*fields: dict[str, object]) -> dict[str, object]:
        terms = [{"matchFields": list(fields)}]
        required = {"nodeSelectorTerms": terms}
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}

    name_in = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    assert affinity_errors(affinity(name_in)) == {}
    assert parse_required_affinity(affinity(name_in)) == (
        NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", ("n1",)),)),
    )
    where = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
    refused = affinity(
        {"key": "metadata.labels", "operator": "In", "values": ["n1"]},
        {"key": "metadata.name", "operator": "Exists"},
        {"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]},
    )
    assert sorted(affinity_errors(refused)) == [
        f"{where}.matchFields[0].key",
        f"{where}.matchFields[1].operator",
        f"{where}.matchFields[2].values",
    ]


# --- 6. A realistic dump -------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_dump_imports_as_it_is() -> None:
    out, err = StringIO(), StringIO()
    call_command("import_manifests", str(DUMP), "--cluster", "dump", stdout=out, stderr=err)
    assert out.getvalue().strip() == (
        "imported into cluster 'dump': ElasticQuota: 4, Job: 4, Node: 2, Pod: 5, PriorityClass: 1"
    )
    assert err.getvalue().strip() == (
        "warning: skipped 7 documents of kinds koordweb does not use: "
        "ConfigMap 2, DaemonSet 1, Deployment 1, Event 1, Service 2"
    )
    pods = {p.name: p for p in Pod.objects.all()}
    assert {name: (p.priority, p.owner_kind) for name, p in pods.items()} == {
        "kube-proxy-abcde": (2_000_001_000, "DaemonSet"),
        "kube-proxy-fghij": (2_000_001_000, "DaemonSet"),
        "coredns-7db6d8ff4d-x2x9k": (2_000_000_000, "ReplicaSet"),
        "trainer-0": (1000, "Job"),
        "trainer-1": (1000, "Job"),
    }
    quota = ElasticQuota.objects.get(name="koordinator-default-quota")
    assert quota.max == {"cpu": 2**63 - 1, "memory": int(MAX_INT64_FIFTH)}
    # Export writes the DaemonSet pod's matchFields back.
    exported = {
        (d["kind"], d["metadata"]["name"]): d for d in export_manifests(Cluster.objects.get())
    }
    proxy = exported[("Pod", "kube-proxy-fghij")]["spec"]["affinity"]["nodeAffinity"]
    required = proxy["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["worker-2"]


@pytest.mark.django_db
def test_the_dump_simulates_as_it_is() -> None:
    out = StringIO()
    call_command("simulate", str(DUMP), stdout=out)
    final = json.loads(out.getvalue())["final"]
    assert final == {
        "kube-system/coredns-7db6d8ff4d-x2x9k": "worker-1",
        "kube-system/kube-proxy-abcde": "worker-1",
        "kube-system/kube-proxy-fghij": "worker-2",
        "team-a/trainer-0": "worker-1",
        "team-a/trainer-1": "worker-1",
    }


def test_the_dump_loads_with_the_safe_loader() -> None:
    (document,) = load_documents(DUMP.read_bytes())
    assert document["kind"] == "List"
    assert parse_manifests(DUMP.read_text()).counts()["Pod"] == 5
