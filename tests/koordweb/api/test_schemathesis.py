"""Schemathesis over the API's own OpenAPI schema, in-process against the WSGI application.

Every operation gets generated requests (valid and invalid) as an administrator and as a tenant;
every answer must be a documented status with a body matching the schema, and never a 5xx.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
import yaml
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.core.media_types import YAML_MEDIA_TYPES
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests import builders as f
from tests.builders import token_client

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@schemathesis.deserializer(*YAML_MEDIA_TYPES)
def yaml_stream(_ctx: Any, response: Any) -> str:
    """The export is a multi-document YAML stream, documented as a string: check it parses."""
    text = response.content.decode("utf-8")
    list(yaml.safe_load_all(text))
    return text


EXAMPLES_PER_OPERATION = 8  # x 2 modes x 2 users x ~45 operations: over 1,000 requests


@pytest.fixture
def api_schema(world, settings: Any) -> Iterator[Any]:
    logging.getLogger("django.request").setLevel(logging.ERROR)  # 4xx are expected by the 1,000
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"user": "100000/min", "anon": "100000/min"},
    }
    raw = SchemaGenerator().get_schema(request=None, public=True)
    loaded = schemathesis.openapi.from_dict(raw)
    loaded.app = get_wsgi_application()
    # The real WSGI handler closes the connection after each request, which would end the test's
    # transaction; Django's own test client keeps it open the same way.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield loaded
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
    logging.getLogger("django.request").setLevel(logging.NOTSET)


def _token(user: Any) -> str:
    client = token_client(user)
    return client._credentials["HTTP_AUTHORIZATION"]


def fuzz(operation: Any, mode: Any, who: str, authorization: str, calls: list[Any]) -> None:
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": authorization}
        response = case.call_and_validate(checks=CHECKS)
        calls.append((who, operation.label, response.status_code))

    try:
        run()
    except Unsatisfiable:
        # Nothing to make invalid (e.g. a GET without parameters): no negative cases exist.
        assert mode == GenerationMode.NEGATIVE


@pytest.mark.slow
def test_schema_fuzzing(api_schema, world):
    job = f.JobFactory(cluster=world.cluster, quota=world.team_a)
    f.PodFactory(job=job, node=world.nodes[0])
    f.DecisionFactory(job=job)
    f.VictimFactory(preemption=f.PreemptionFactory(preemptor=job))
    f.RoundFactory(cluster=world.cluster)
    users = {"admin": _token(world.admin), "alice": _token(world.alice)}
    calls: list[tuple[str, str, int]] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 30
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for who, authorization in users.items():
                fuzz(operation, mode, who, authorization, calls)
    print(f"schemathesis: {len(calls)} requests over {len(operations)} operations")
    assert len(calls) >= 1000, len(calls)
    assert not [c for c in calls if c[2] >= 500]


# NUL, C0 and C1 controls, an escape sequence and DEL (issue #16 item 5).
CONTROL_VALUES = ["\x00", "nul\x00inside", "\x01\x02\x1f", "\x1b[2J", "\x7f", "\u0085next-line"]


def _string_properties(operation: Any) -> list[str]:
    """Top-level string properties of the operation's JSON body, if it has one."""
    content = (operation.definition.raw.get("requestBody") or {}).get("content") or {}
    schema = (content.get("application/json") or {}).get("schema") or {}
    ref = schema.get("$ref", "")
    if ref:
        schema = operation.schema.raw_schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return [
        name
        for name, prop in (schema.get("properties") or {}).items()
        if prop.get("type") == "string" and not prop.get("readOnly")
    ]


@pytest.mark.slow
def test_control_characters_in_every_string_parameter(api_schema, world):
    """Every path and query parameter, and every top-level string of a JSON body, of every
    operation, with NUL and control characters, as an admin and as a tenant: never a 5xx."""
    f.RoundFactory(cluster=world.cluster)
    users = {"admin": _token(world.admin), "alice": _token(world.alice)}
    operations = [result.ok() for result in api_schema.get_all_operations()]
    answers: list[tuple[str, str, str, int]] = []
    for operation in operations:
        path_values = {parameter.name: "1" for parameter in operation.path_parameters}
        targets = [("path", p.name) for p in operation.path_parameters]
        targets += [("query", p.name) for p in operation.query]
        targets += [("body", name) for name in _string_properties(operation)]
        for who, authorization in users.items():
            for location, name in targets:
                for value in CONTROL_VALUES:
                    case = operation.Case(
                        path_parameters={**path_values, name: value}
                        if location == "path"
                        else path_values,
                        query={name: value} if location == "query" else None,
                        body={name: value} if location == "body" else NOT_SET,
                        media_type="application/json" if location == "body" else None,
                        headers={"Authorization": authorization},
                    )
                    response = case.call()
                    answers.append(
                        (who, operation.label, f"{location}:{name}", response.status_code)
                    )
    print(f"schemathesis: {len(answers)} requests with control characters")
    assert len(answers) > 500
    assert not [answer for answer in answers if answer[3] >= 500]
    # Path and query parameters are refused at the edge, naming the parameter.
    refused = [a for a in answers if not a[2].startswith("body") and a[3] == 400]
    assert len(refused) == len([a for a in answers if not a[2].startswith("body")])
