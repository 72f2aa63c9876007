"""Reads, writes and errors of the fake server, through the real kubernetes client's models."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.fakekube import FakeKube
from tests.fakekube.testing import RUNNING, node, pod

QUOTAS = ("scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas")
TOPOLOGY = ("scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies")


def status_of(error: ApiException, api: client.ApiClient) -> client.V1Status:
    status = api.deserialize(error.body, "V1Status", "application/json")
    assert isinstance(status, client.V1Status)
    return status


def test_lists_deserialise_into_the_clients_models(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.add(node("node-1", zone="a"))
    kube.add(pod("p1", status=RUNNING, nodeName="node-1"))
    nodes = core.list_node()
    assert isinstance(nodes, client.V1NodeList)
    assert [n.metadata.name for n in nodes.items] == ["node-1"]
    assert nodes.items[0].status.allocatable == {"cpu": "16", "memory": "64Gi"}
    pods = core.list_pod_for_all_namespaces()
    assert isinstance(pods.items[0], client.V1Pod)
    assert pods.items[0].spec.node_name == "node-1"
    assert int(pods.metadata.resource_version) >= int(pods.items[0].metadata.resource_version)


def test_missing_object_is_a_not_found_status(
    core: client.CoreV1Api, api: client.ApiClient
) -> None:
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("ghost", "default")
    assert caught.value.status == 404
    body = json.loads(caught.value.body)
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "ghost" not found',
        "reason": "NotFound",
        "details": {"name": "ghost", "kind": "pods"},
        "code": 404,
    }
    assert status_of(caught.value, api).reason == "NotFound"


def test_create_twice_is_already_exists(core: client.CoreV1Api, api: client.ApiClient) -> None:
    created = core.create_namespaced_pod("default", pod("p1", schedulerName="koordweb"))
    assert created.status.phase == "Pending" and created.metadata.uid
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", pod("p1"))
    status = status_of(caught.value, api)
    assert (status.code, status.reason) == (409, "AlreadyExists")
    assert status.message == 'pods "p1" already exists'


def test_create_in_a_missing_namespace_is_not_found(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("nowhere", pod("p1", namespace="nowhere"))
    assert caught.value.status == 404
    assert json.loads(caught.value.body)["message"] == 'namespaces "nowhere" not found'


QUALIFIED = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def test_a_pod_with_an_invalid_label_is_refused_as_invalid(
    core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """kube-apiserver validates metadata.labels (ValidateLabels): a 422 Invalid naming the field,
    in apimachinery's words, and nothing created."""
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", pod("p1", labels={"bad key!": "x"}))
    status = status_of(caught.value, api)
    assert (status.code, status.reason) == (422, "Invalid")
    assert status.message == (
        f'Pod "p1" is invalid: metadata.labels: Invalid value: "bad key!": name part {QUALIFIED}'
    )
    assert status.details.kind == "Pod" and status.details.name == "p1"
    assert [(c.field, c.reason) for c in status.details.causes] == [
        ("metadata.labels", "FieldValueInvalid")
    ]
    assert core.list_namespaced_pod("default").items == []


def test_a_pod_name_must_be_a_dns_subdomain(core: client.CoreV1Api, api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", pod("My_Job-0"))
    status = status_of(caught.value, api)
    assert (status.code, status.reason) == (422, "Invalid")
    assert status.message.startswith(
        'Pod "My_Job-0" is invalid: metadata.name: Invalid value: "My_Job-0": a lowercase RFC 1123 '
        "subdomain must consist of lower case alphanumeric characters"
    )


def test_every_invalid_field_of_a_pod_is_listed(
    core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """Several field errors come back together, as Go prints an ErrorList: `[a, b]`."""
    body = pod(
        "p2",
        labels={"app": "has space"},
        nodeSelector={"a/b/c": "x"},
        tolerations=[{"key": "gpu", "operator": "Exists", "value": "x"}],
    )
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", body)
    status = status_of(caught.value, api)
    assert status.message.startswith('Pod "p2" is invalid: [metadata.labels: Invalid value: ')
    assert [c.field for c in status.details.causes] == [
        "metadata.labels",
        "spec.nodeSelector",
        "spec.tolerations[0].operator",
    ]
    assert (
        "spec.tolerations[0].operator: Invalid value: "
        'core.Toleration{Key:"gpu", Operator:"Exists", Value:"x", Effect:"", '
        "TolerationSeconds:(*int64)(nil)}: value must be empty when "
        "`operator` is 'Exists'"
    ) in status.message


def test_a_pods_node_affinity_and_resource_names_are_validated(
    core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """ValidateNodeSelectorRequirement, the preferred terms' weights and
    validateContainerResourceName, in kube-apiserver's words."""
    terms = [
        {"matchExpressions": [{"key": "zone", "operator": "In"}]},
        {"matchExpressions": [{"key": "zone", "operator": "Exists", "values": ["a"]}]},
        {"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["1", "2"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]},
        {"matchFields": [{"key": "spec.nodeName", "operator": "In", "values": ["n1"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["not a label"]}]},
    ]
    body = pod(
        "p3",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 500, "preference": {"matchExpressions": []}}
                ],
            }
        },
    )
    body["spec"]["containers"][0]["resources"] = {"requests": {"pods": "2", "cpu": "1"}}
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", body)
    status = status_of(caught.value, api)
    assert (status.code, status.reason) == (422, "Invalid")
    required = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    assert [(c.field, c.reason) for c in status.details.causes] == [
        ("spec.containers[0].resources.requests[pods]", "FieldValueInvalid"),
        (f"{required}.nodeSelectorTerms[0].matchExpressions[0].values", "FieldValueRequired"),
        (f"{required}.nodeSelectorTerms[1].matchExpressions[0].values", "FieldValueForbidden"),
        (f"{required}.nodeSelectorTerms[2].matchExpressions[0].values", "FieldValueRequired"),
        (f"{required}.nodeSelectorTerms[3].matchExpressions[0].operator", "FieldValueInvalid"),
        (f"{required}.nodeSelectorTerms[4].matchFields[0].key", "FieldValueInvalid"),
        (f"{required}.nodeSelectorTerms[5].matchExpressions[0].values[0]", "FieldValueInvalid"),
        (
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
            "FieldValueInvalid",
        ),
    ]
    assert "Required value: must be specified when `operator` is 'In' or 'NotIn'" in status.message
    assert 'Invalid value: "Near": not a valid selector operator' in status.message
    assert "Invalid value: 500: must be in the range 1-100" in status.message
    assert 'Invalid value: "pods": must be a standard resource for containers' in status.message
    assert core.list_namespaced_pod("default").items == []


def test_pod_priority_comes_from_its_priority_class(core: client.CoreV1Api, kube: FakeKube) -> None:
    kube.add(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    created = core.create_namespaced_pod("default", pod("p1", priorityClassName="high"))
    assert created.spec.priority == 1000
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", pod("p2", priorityClassName="missing"))
    assert caught.value.status == 403


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("team=a", ["p1", "p2"]),
        ("team==a,tier!=gpu", ["p1"]),
        ("team in (a, b)", ["p1", "p2", "p3"]),
        ("team notin (a)", ["p3", "p4"]),
        ("tier", ["p2"]),
        ("!team", ["p4"]),
    ],
)
def test_label_selectors(
    kube: FakeKube, core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    kube.add(pod("p1", labels={"team": "a"}))
    kube.add(pod("p2", labels={"team": "a", "tier": "gpu"}))
    kube.add(pod("p3", labels={"team": "b"}))
    kube.add(pod("p4"))
    found = core.list_namespaced_pod("default", label_selector=selector)
    assert [p.metadata.name for p in found.items] == expected


def test_field_selectors(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.add(pod("bound", nodeName="node-1", status=RUNNING))
    kube.add(pod("ours", schedulerName="koordweb"))
    kube.add(pod("other", namespace="team-b", schedulerName="koordweb"))

    def names(selector: str) -> list[str]:
        items = core.list_pod_for_all_namespaces(field_selector=selector).items
        return [p.metadata.name for p in items]

    assert names("spec.nodeName=node-1") == ["bound"]
    assert names("spec.nodeName=,spec.schedulerName=koordweb") == ["ours", "other"]
    assert names("status.phase!=Running") == ["ours", "other"]
    assert names("metadata.namespace=team-b") == ["other"]
    assert names("metadata.name=ours") == ["ours"]
    with pytest.raises(ApiException) as caught:
        names("spec.priority=3")
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["message"] == "field label not supported: spec.priority"


def test_limit_and_continue_page_through_a_list(kube: FakeKube, core: client.CoreV1Api) -> None:
    for i in range(5):
        kube.add(node(f"node-{i}"))
    first = core.list_node(limit=2)
    assert [n.metadata.name for n in first.items] == ["node-0", "node-1"]
    assert first.metadata.remaining_item_count == 3
    second = core.list_node(limit=2, _continue=first.metadata._continue)
    third = core.list_node(limit=2, _continue=second.metadata._continue)
    assert [n.metadata.name for n in second.items + third.items] == ["node-2", "node-3", "node-4"]
    assert third.metadata._continue is None
    kube.add(node("node-9"))
    kube.store.compact()
    with pytest.raises(ApiException) as caught:
        core.list_node(limit=2, _continue=first.metadata._continue)
    assert caught.value.status == 410
    assert json.loads(caught.value.body)["reason"] == "Expired"


def test_strategic_merge_patch_of_pod_metadata(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.add(pod("p1", labels={"keep": "yes", "drop": "me"}))
    patched = core.patch_namespaced_pod(
        "p1",
        "default",
        {"metadata": {"annotations": {"a": "1"}, "labels": {"drop": None, "gang": "g1"}}},
    )
    assert patched.metadata.labels == {"keep": "yes", "gang": "g1"}
    assert patched.metadata.annotations == {"a": "1"}
    requests = kube.faults.requests_to("/pods/p1$", "PATCH")
    assert requests[0].content_type == "application/strategic-merge-patch+json"


def test_patch_with_a_stale_resource_version_conflicts(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    first = kube.add(pod("p1"))
    core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"v": "2"}}})
    stale = {
        "metadata": {"resourceVersion": first["metadata"]["resourceVersion"], "labels": {"v": "3"}}
    }
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod("p1", "default", stale)
    status = status_of(caught.value, api)
    assert (status.code, status.reason) == (409, "Conflict")
    assert status.message == (
        'Operation cannot be fulfilled on pods "p1": the object has been modified; please apply '
        "your changes to the latest version and try again"
    )


def test_pod_status_subresource(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.add(
        pod("p1", status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
    )
    patched = core.patch_namespaced_pod_status(
        "p1",
        "default",
        {
            "status": {
                "nominatedNodeName": "node-2",
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "message": "by default/job-a",
                    }
                ],
            }
        },
    )
    assert patched.status.nominated_node_name == "node-2"
    assert sorted(c.type for c in patched.status.conditions) == ["DisruptionTarget", "Ready"]
    # The main resource cannot write status, and the status subresource cannot write spec.
    core.patch_namespaced_pod("p1", "default", {"status": {"phase": "Failed"}})
    core.patch_namespaced_pod_status("p1", "default", {"spec": {"nodeName": "node-9"}})
    stored = kube.pod("default", "p1")
    assert stored is not None
    assert stored["status"]["phase"] == "Running" and "nodeName" not in stored["spec"]


def test_custom_objects_cluster_scoped_and_namespaced(
    custom: client.CustomObjectsApi, kube: FakeKube
) -> None:
    topology = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {"networkTopologySpec": [{"topologyLayer": "NodeTopologyLayer"}]},
    }
    created = custom.create_cluster_custom_object(*TOPOLOGY, topology)
    assert created["metadata"]["generation"] == 1
    assert custom.get_cluster_custom_object(*TOPOLOGY, "default")["spec"] == topology["spec"]
    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "q1"},
        "spec": {"max": {"cpu": "10"}},
    }
    custom.create_namespaced_custom_object(*QUOTAS[:2], "default", QUOTAS[2], quota)
    listed = custom.list_cluster_custom_object(*QUOTAS)
    assert listed["kind"] == "ElasticQuotaList"
    assert listed["items"][0]["kind"] == "ElasticQuota"
    with pytest.raises(ApiException) as caught:
        custom.get_namespaced_custom_object(*QUOTAS[:2], "default", QUOTAS[2], "ghost")
    body = json.loads(caught.value.body)
    assert body["message"] == 'elasticquotas.scheduling.sigs.k8s.io "ghost" not found'
    assert body["details"] == {
        "name": "ghost",
        "group": "scheduling.sigs.k8s.io",
        "kind": "elasticquotas",
    }


def test_custom_object_replace_needs_a_fresh_resource_version(
    custom: client.CustomObjectsApi,
) -> None:
    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "q1"},
        "spec": {"max": {"cpu": "10"}},
    }
    created = custom.create_namespaced_custom_object(*QUOTAS[:2], "default", QUOTAS[2], quota)
    with pytest.raises(ApiException) as caught:
        custom.replace_namespaced_custom_object(*QUOTAS[:2], "default", QUOTAS[2], "q1", quota)
    assert caught.value.status == 422
    created["spec"]["max"]["cpu"] = "20"
    replaced = custom.replace_namespaced_custom_object(
        *QUOTAS[:2], "default", QUOTAS[2], "q1", created
    )
    assert replaced["spec"]["max"]["cpu"] == "20" and replaced["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as caught:
        custom.replace_namespaced_custom_object(*QUOTAS[:2], "default", QUOTAS[2], "q1", created)
    assert caught.value.status == 409


def test_custom_objects_refuse_strategic_merge(custom: client.CustomObjectsApi) -> None:
    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "q1"},
        "spec": {"max": {"cpu": "10"}},
    }
    custom.create_namespaced_custom_object(*QUOTAS[:2], "default", QUOTAS[2], quota)
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(
            *QUOTAS[:2],
            "default",
            QUOTAS[2],
            "q1",
            {"spec": {"min": {"cpu": "1"}}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert caught.value.status == 415
    merged = custom.patch_namespaced_custom_object(  # the client's default: merge patch
        *QUOTAS[:2], "default", QUOTAS[2], "q1", {"spec": {"min": {"cpu": "1"}}}
    )
    assert merged["spec"] == {"max": {"cpu": "10"}, "min": {"cpu": "1"}}


def test_delete_answers_per_kind_and_404s_after(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    kube.add(node("node-1"))
    kube.add(pod("p1"))
    answer = core.delete_node("node-1")  # typed `object` by this client: a dict
    deleted_node = api.deserialize(json.dumps(answer), "V1Status", "application/json")
    assert deleted_node.status == "Success" and deleted_node.details.name == "node-1"
    deleted_pod = core.delete_namespaced_pod("p1", "default")
    assert isinstance(deleted_pod, client.V1Pod) and deleted_pod.metadata.name == "p1"
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_pod("p1", "default")
    assert status_of(caught.value, api).code == 404


def test_unknown_paths_are_the_servers_generic_not_found(
    api: client.ApiClient, kube: FakeKube
) -> None:
    import urllib3

    answer = urllib3.PoolManager().request("GET", f"{kube.url}/apis/example.com/v1/widgets")
    assert answer.status == 404
    assert answer.json()["message"] == "the server could not find the requested resource"


def test_patch_with_another_uid_is_a_precondition_conflict(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(pod("p1"))
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod(
            "p1", "default", {"metadata": {"uid": "old", "labels": {"a": "b"}}}
        )
    assert caught.value.status == 409
    assert (
        "Precondition failed: UID in precondition: old" in json.loads(caught.value.body)["message"]
    )
    stored = kube.pod("default", "p1")
    assert stored is not None and stored["metadata"]["labels"] == {}


def test_json_patch_operations(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.add(pod("p1", labels={"a": "1"}))
    patched = core.patch_namespaced_pod(
        "p1",
        "default",
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ],
    )
    assert patched.metadata.labels == {"b": "2"}
    assert kube.faults.requests_to("/pods/p1$")[-1].content_type == "application/json-patch+json"
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod(
            "p1", "default", [{"op": "test", "path": "/metadata/labels/b", "value": "9"}]
        )
    assert caught.value.status == 422


def test_no_op_writes_keep_the_resource_version(kube: FakeKube, core: client.CoreV1Api) -> None:
    first = kube.add(pod("p1", labels={"a": "1"}))
    same = core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"a": "1"}}})
    assert same.metadata.resource_version == first["metadata"]["resourceVersion"]


def test_pages_follow_key_order_across_namespaces(kube: FakeKube, core: client.CoreV1Api) -> None:
    expected = []
    for namespace in ("a", "a-b", "b"):  # "a-b/x" sorts before "a/x" as text, not as a key
        for name in ("x", "y"):
            kube.add(pod(name, namespace=namespace))
            expected.append((namespace, name))
    seen, token = [], None
    while True:
        page = core.list_pod_for_all_namespaces(limit=4, _continue=token)
        seen += [(p.metadata.namespace, p.metadata.name) for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert seen == expected


def test_other_builtin_kinds_deserialise(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    kube.add(pod("w0", labels={"app": "train"}, nodeName="node-1", status=RUNNING))
    kube.add(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}},
        }
    )
    kube.add(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
            "preemptionPolicy": "Never",
        }
    )
    budgets = client.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces()
    assert isinstance(budgets, client.V1PodDisruptionBudgetList)
    status = budgets.items[0].status
    assert (status.current_healthy, status.desired_healthy, status.disruptions_allowed) == (1, 1, 0)
    classes = client.SchedulingV1Api(api).list_priority_class()
    assert isinstance(classes.items[0], client.V1PriorityClass)
    assert (classes.items[0].value, classes.items[0].preemption_policy) == (1000, "Never")
    assert [n.metadata.name for n in core.list_namespace().items] == ["default", "kube-system"]
    created = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "settings"}, "data": {"k": "v"}}
    )
    assert isinstance(created, client.V1ConfigMap) and created.data == {"k": "v"}
