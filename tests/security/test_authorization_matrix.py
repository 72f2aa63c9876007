"""An authorization matrix over every URL of the project x (anonymous, tenant A, tenant B, admin).

Path parameters are filled with real ids. Each tenant is handed the other's objects (A -> B and
B -> A): every read of them must be 404, every write refused, none of the other's job names may
appear in any body received, and the other's rows must be unchanged at the end. Anonymous users
are sent to a login page (UI, admin) or get 401/403 (API); tenants never get past the Django
admin, the import page or manifest export. Each test walks all routes and reports every
violation at once, not just the first.

The hostile-tenant column (issue #16) submits, as a tenant, one forbidden field at a time,
generated from the submission policy (tests/security/hostile.py): each must be a 400 naming
the field, with nothing written.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import resolve
from knox.models import AuthToken

from koordweb.models import ElasticQuota, Job, Pod, Preemption, PriorityClass
from tests.builders import (
    B_SECRET,
    PreemptionFactory,
    PriorityClassFactory,
    Tenant,
    Tenants,
    VictimFactory,
)
from tests.security.hostile import (
    HostileCase,
    graft,
    hostile_cases,
    refused_json_labels,
    valid_documents,
)
from tests.security.urlwalk import Route, concrete, routes

ALL_ROUTES = routes()
# Pages anyone may open: the login forms, logging out, and the API's JSON 404 for unknown paths.
PUBLIC = {
    ("ui", "login"),
    ("ui", "logout"),
    ("admin", "login"),
    ("admin", "logout"),
    ("api", "catch-all"),
    # The OpenAPI schema and Swagger UI are served to anyone (drf-spectacular's default); they
    # describe the API, not its data. The bodies are still checked for tenants' job names below.
    ("api", "api-schema"),
    ("api", "api-docs"),
}
# Open to scrapers on the loopback address by design (koordweb.prometheus.metrics); from any
# other address they need a bearer token, which is what anonymous requests are checked for.
LOOPBACK_ONLY = {("ui", "metrics")}
REMOTE_ADDR = "192.0.2.50"  # TEST-NET-1: a client that is not on this machine
ADMIN_ONLY = {("ui", "import"), ("api", "manifests"), ("api", "scheduler-config")}
# Collections whose members belong to one tenant (the rest are the shared cluster catalog).
TENANT_OWNED = {"jobs", "preemptions", "quotas", "tokens"}
UNSAFE_METHODS = ("post", "put", "patch", "delete")


def area(route: Route) -> str:
    if route.template.startswith("admin/"):
        return "admin"
    return "api" if route.template.startswith("api/") else "ui"


def key(route: Route) -> tuple[str, str]:
    if route.module == "koordweb.api.views.not_found":
        return ("api", "catch-all")
    return (area(route), route.name or "")


def owned_by_tenant(route: Route) -> bool:
    """Does this route address one tenant's object (a job, a preemption, a quota, a token)?"""
    found: list[bool] = []

    def probe(name: str, collection: str) -> str:
        found.append(area(route) != "admin" and collection in TENANT_OWNED)
        return "1"

    concrete(route, probe)
    return any(found)


def filler(world: Tenants, owner: Tenant) -> Any:
    job_type = ContentType.objects.get_for_model(Job)

    def fill(name: str, collection: str) -> str:
        if name == "format":
            return "json"
        if name == "token_key":
            return owner.token_key
        if name in {"url", "path"}:
            return "no-such-page/"
        if name == "app_label":
            return "koordweb"
        if name == "content_type_id":
            return str(job_type.pk)
        if name == "object_id":
            return str(owner.job.pk)
        if name == "id" and collection == "user":
            return str(owner.user.pk)  # the admin's password change page
        by_collection = {
            "jobs": owner.job.pk,
            "preemptions": owner.preemption.pk,
            "quotas": owner.quota.pk,
            "rounds": world.round.pk,
            "nodes": world.node.pk,
            "devices": world.device.pk,
            "layers": world.layer.pk,
            "priority-classes": world.priority_class.pk,
        }
        if collection not in by_collection:
            raise AssertionError(f"no value for <{name}> after {collection!r}: extend filler()")
        return str(by_collection[collection])

    return fill


def url_for(route: Route, world: Tenants, owner: Tenant) -> str:
    path = concrete(route, filler(world, owner))
    match = resolve(path)
    assert match.url_name == route.name, f"{route.template} filled as {path} resolves elsewhere"
    return path


def client_for(user: Any, token: str | None = None) -> Client:
    client = Client(
        headers={"Authorization": f"Token {token}"} if token else None,
        raise_request_exception=False,
    )
    if user is not None:
        client.force_login(user)
    return client


def marker(tenant: Tenant) -> str:
    """A string in every name of the tenant's jobs and pods ("alpha-open", "bravo-secret")."""
    return tenant.job.name.rsplit("-", 1)[0]


def state_of(b: Tenant) -> dict[str, Any]:
    return {
        "jobs": list(Job.objects.filter(quota=b.quota).order_by("pk").values()),
        "pods": list(Pod.objects.filter(job__quota=b.quota).order_by("pk").values()),
        "preemptions": list(Preemption.objects.filter(preemptor__quota=b.quota).values()),
        "tokens": list(AuthToken.objects.filter(user=b.user).values_list("token_key", flat=True)),
        "members": list(b.quota.members.values_list("pk", flat=True)),
    }


def _redirects_to_login(response: Any, login_path: str) -> bool:
    return response.status_code == 302 and response["Location"].startswith(login_path)


def test_every_route_is_covered(world: Tenants) -> None:
    """The walk sees all three areas, and every route's parameters can be filled."""
    areas = {area(route) for route in ALL_ROUTES}
    assert areas == {"admin", "api", "ui"}
    for route in ALL_ROUTES:
        url_for(route, world, world.b)
    assert len(ALL_ROUTES) > 100


def test_anonymous_is_sent_to_login_or_refused(world: Tenants) -> None:
    client = Client(raise_request_exception=False)
    holes = []
    for route in ALL_ROUTES:
        if key(route) in PUBLIC:
            continue
        path = url_for(route, world, world.b)
        for method in ("get", "post"):
            if key(route) in LOOPBACK_ONLY:
                response = getattr(client, method)(path, REMOTE_ADDR=REMOTE_ADDR)
            else:
                response = getattr(client, method)(path)
            status = response.status_code
            if key(route) in LOOPBACK_ONLY:
                ok = status in (401, 403, 405)
            elif area(route) == "api":
                ok = status in (401, 403)
            elif area(route) == "admin":
                ok = _redirects_to_login(response, "/admin/login/")
            else:
                ok = _redirects_to_login(response, "/login/") or status == 405
            body = response.content.decode("utf-8", "replace")
            if not ok or any(marker(tenant) in body for tenant in (world.a, world.b)):
                holes.append(f"{method.upper()} {path} -> {status}")
    assert not holes, "anonymous reached:\n" + "\n".join(holes)


PAIRS = pytest.mark.parametrize(("actor", "other"), [("a", "b"), ("b", "a")])


@PAIRS
def test_a_tenant_never_reads_another(world: Tenants, actor: str, other: str) -> None:
    me, them = getattr(world, actor), getattr(world, other)
    client = client_for(me.user, me.token)
    holes = []
    for route in ALL_ROUTES:
        if key(route) in PUBLIC:
            continue
        path = url_for(route, world, them)
        response = client.get(path)
        status = response.status_code
        body = response.content.decode("utf-8", "replace")
        problem = ""
        if status >= 500:
            problem = "server error"
        elif marker(them) in body:
            problem = "body names the other tenant's job or pods"
        elif area(route) == "admin":
            if not _redirects_to_login(response, "/admin/login/"):
                problem = "Django admin not refused"
        elif key(route) in ADMIN_ONLY:
            if status not in (403, 404):
                problem = "admin-only page not refused"
        elif owned_by_tenant(route) and status not in (404, 405):
            problem = "the other tenant's object not 404"
        if problem:
            holes.append(f"GET {path} -> {status}: {problem}")
    assert not holes, f"tenant {actor} read tenant {other}'s data:\n" + "\n".join(holes)


@pytest.mark.parametrize("tenant", ["a", "b"])
def test_each_tenant_reads_its_own_job(world: Tenants, tenant: str) -> None:
    """The other side of the matrix: the same routes with one's own ids answer 200, so the 404s
    above are about ownership, not about badly filled paths."""
    me: Tenant = getattr(world, tenant)
    client = client_for(me.user, me.token)
    for path in (
        f"/jobs/{me.job.pk}/",
        f"/api/v1/jobs/{me.job.pk}/",
        f"/api/v1/jobs/{me.job.pk}/explain/",
        f"/preemptions/{me.preemption.pk}/",
        f"/api/v1/preemptions/{me.preemption.pk}/",
        f"/api/v1/quotas/{me.quota.pk}/",
    ):
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        assert me.job.name in response.content.decode() or "quotas" in path


@PAIRS
def test_a_tenant_never_writes_another(world: Tenants, actor: str, other: str) -> None:
    me, them = getattr(world, actor), getattr(world, other)
    client = client_for(me.user, me.token)
    before = state_of(them)
    holes = []
    for route in ALL_ROUTES:
        if key(route) in PUBLIC:
            continue  # logging out would end the session the loop relies on
        path = url_for(route, world, them)
        # Pages and the Django admin only act on POST; the API has every verb.
        for method in UNSAFE_METHODS if area(route) == "api" else ("post",):
            response = getattr(client, method)(path, data={}, content_type="application/json")
            status = response.status_code
            problem = ""
            if status >= 500:
                problem = "server error"
            elif area(route) == "admin":
                if not _redirects_to_login(response, "/admin/login/"):
                    problem = "Django admin not refused"
            elif key(route) in ADMIN_ONLY:
                if status not in (403, 404, 405):
                    problem = "admin-only action not refused"
            elif owned_by_tenant(route):
                # The token revoke page answers "No such token" with a redirect to /tokens/.
                refused = status in (403, 404, 405) or (
                    key(route) == ("ui", "token-revoke") and status == 302
                )
                if not refused:
                    problem = "write to the other tenant's object not refused"
            if problem:
                holes.append(f"{method.upper()} {path} -> {status}: {problem}")
    assert state_of(them) == before, f"tenant {other}'s rows changed"
    assert not holes, f"tenant {actor} wrote:\n" + "\n".join(holes)


def test_tenant_cannot_submit_into_another_tenants_quota(world: Tenants) -> None:
    client = client_for(world.a.user, world.a.token)
    jobs = Job.objects.count()
    body = {"name": "sneaky", "quota": world.b.quota.name, "pod": {"requests": {"cpu": "1"}}}
    response = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert 400 <= response.status_code < 500, response.content
    response = client.post(
        "/jobs/submit/",
        {"name": "sneaky", "namespace": "default", "quota": world.b.quota.name, "replicas": 1},
    )
    assert response.status_code in (200, 400, 403)
    assert Job.objects.count() == jobs


def test_admin_reaches_everything_without_errors(world: Tenants) -> None:
    client = client_for(world.admin)
    errors = []
    for route in ALL_ROUTES:
        if key(route) in {("ui", "logout"), ("admin", "logout")}:
            continue
        path = url_for(route, world, world.b)
        status = client.get(path).status_code
        if status >= 500:
            errors.append(f"GET {path} -> {status}")
    assert client.get(f"/api/v1/jobs/{world.b.job.pk}/").status_code == 200
    assert client.get(f"/jobs/{world.b.job.pk}/").status_code == 200
    assert client.get("/import/").status_code == 200
    assert not errors, "\n".join(errors)


def _a_preempts_b(world: Tenants) -> Preemption:
    """A cross-tenant preemption: tenant A's job evicted tenant B's job."""
    preemption = PreemptionFactory(
        preemptor=world.a.job,
        round=world.round,
        reason="priority",
        cost={},
        created_at=world.round.started_at,
    )
    VictimFactory(
        preemption=preemption, job=world.b.job, pods=[f"{world.b.job.name}-0"], freed={"cpu": 1000}
    )
    return preemption


def test_api_hides_other_tenants_victims_from_the_preemptor(world: Tenants) -> None:
    preemption = _a_preempts_b(world)
    client = client_for(world.a.user, world.a.token)
    for path in (f"/api/v1/preemptions/{preemption.pk}/", "/api/v1/preemptions/"):
        response = client.get(path)
        assert response.status_code == 200
        assert B_SECRET not in response.content.decode(), path


def test_ui_hides_other_tenants_victims_from_the_preemptor(world: Tenants) -> None:
    """Fix in koordweb/selectors/preemptions.py: `_row(item, member_quota_ids)` keeps only victims
    whose job.quota_id is in the user's member quotas (None for admins), as the API's
    PreemptionSerializer does; preemption_list/detail compute the set once per call."""
    preemption = _a_preempts_b(world)
    client = client_for(world.a.user)
    leaks = []
    for path in (f"/preemptions/{preemption.pk}/", "/preemptions/"):
        response = client.get(path)
        assert response.status_code == 200
        if B_SECRET in response.content.decode():
            leaks.append(path)
    assert not leaks, leaks


# The hostile-tenant column (issue #16): a tenant's submissions carrying each field the
# submission policy refuses, generated from the policy (tests/security/hostile.py).
HOSTILE = hostile_cases()


@pytest.fixture
def never_class(world: Tenants) -> PriorityClass:
    return PriorityClassFactory(
        cluster=world.cluster, name="koord-free", value=1000, preemption_policy="Never"
    )


def _written() -> tuple[int, int, list[Any]]:
    return Job.objects.count(), Pod.objects.count(), list(Job.objects.values().order_by("pk"))


def test_the_hostile_column_covers_what_the_issue_names() -> None:
    """The generated cases include every field issue #16 found taken from a tenant's YAML."""
    paths = {case.path for case in HOSTILE}
    for path in (
        "metadata.annotations.scheduling.koordinator.sh/device-allocated",
        "spec.nodeName",
        "spec.preemptionPolicy",
        "spec.schedulerName",
        "metadata.creationTimestamp",
        "metadata.deletionTimestamp",
        "metadata.uid",
        "metadata.resourceVersion",
        "status.nominatedNodeName",
        "status.startTime",
    ):
        assert path in paths, path
    assert len(HOSTILE) > 60


@pytest.mark.parametrize("case", HOSTILE, ids=[case.id for case in HOSTILE])
def test_hostile_tenant_yaml_is_refused_naming_the_field(
    world: Tenants, never_class: PriorityClass, case: HostileCase
) -> None:
    client = client_for(world.a.user, world.a.token)
    documents = valid_documents(world.a.quota.name, world.a.quota.namespace, "hostile")
    documents["Pod"]["spec"]["priorityClassName"] = case.priority_class
    documents[case.kind] = graft(documents[case.kind], case.keys, case.value)
    text = yaml.safe_dump_all([documents["PodGroup"], documents["Pod"]])
    before = _written()
    response = client.generic(
        "POST", "/api/v1/jobs/", text.encode(), content_type="application/yaml"
    )
    assert response.status_code == 400, response.content
    assert case.path in response.json(), response.json()
    assert _written() == before


def test_the_same_submission_without_the_field_is_accepted(world: Tenants) -> None:
    """The control: the base every hostile case grafts onto is itself a valid submission."""
    client = client_for(world.a.user, world.a.token)
    documents = valid_documents(world.a.quota.name, world.a.quota.namespace, "benign")
    text = yaml.safe_dump_all([documents["PodGroup"], documents["Pod"]])
    response = client.generic(
        "POST", "/api/v1/jobs/", text.encode(), content_type="application/yaml"
    )
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("label", sorted(refused_json_labels()))
def test_hostile_tenant_json_labels_are_refused_naming_the_field(
    world: Tenants, label: str
) -> None:
    client = client_for(world.a.user, world.a.token)
    body = {
        "name": "hostile-json",
        "quota": world.a.quota.name,
        "labels": {label: "x"},
        "pod": {"requests": {"cpu": "1"}},
    }
    before = _written()
    response = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert f"labels.{label}" in response.json(), response.json()
    assert _written() == before


def test_hostile_tenant_submits_into_another_teams_namespace(world: Tenants) -> None:
    """Namespaces belong to teams: A's quota in A's namespace, B's in B's (issue #16 item 2)."""
    ElasticQuota.objects.filter(pk=world.a.quota.pk).update(namespace="alpha")
    ElasticQuota.objects.filter(pk=world.b.quota.pk).update(namespace="bravo")
    client = client_for(world.a.user, world.a.token)
    before = _written()
    body = {
        "name": "squat",
        "namespace": "bravo",
        "quota": world.a.quota.name,
        "pod": {"requests": {"cpu": "1"}},
    }
    response = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400 and "namespace" in response.json(), response.content
    documents = valid_documents(world.a.quota.name, "bravo", "squat")
    text = yaml.safe_dump_all([documents["PodGroup"], documents["Pod"]])
    response = client.generic(
        "POST", "/api/v1/jobs/", text.encode(), content_type="application/yaml"
    )
    assert response.status_code == 400 and "namespace" in response.json(), response.content
    assert B_SECRET not in response.content.decode()
    assert _written() == before


def test_ui_does_not_name_another_teams_preemptor_to_the_victim(world: Tenants) -> None:
    """Issue #16: B, whose job A's job preempted, reads "another team's job", not A's job name,
    on the preemption pages and on its job's page (the API: `preemptor.name` is null)."""
    preemption = _a_preempts_b(world)
    client = client_for(world.b.user)
    leaks = []
    for path in (
        f"/preemptions/{preemption.pk}/",
        "/preemptions/",
        f"/jobs/{world.b.job.pk}/",
        f"/api/v1/preemptions/{preemption.pk}/",
        f"/api/v1/jobs/{world.b.job.pk}/explain/",
    ):
        response = client.get(path)
        assert response.status_code == 200, path
        if marker(world.a) in response.content.decode():
            leaks.append(path)
    assert not leaks, leaks
    assert "another team&#x27;s job" in client.get(f"/jobs/{world.b.job.pk}/").content.decode()
