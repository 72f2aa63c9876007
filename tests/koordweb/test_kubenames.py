"""`koordweb.kubenames`: names, label keys and values, annotation keys and tolerations checked as
the Kubernetes API server checks them. The fake API server carries its own implementation, written
from apimachinery's source (tests/fakekube/validation.py); on every case below the two agree on
valid or refused, so a rule misread in one shows up as a disagreement."""

from __future__ import annotations

import pytest

from koordweb.kubenames import (
    annotations_errors,
    is_dns_label,
    is_dns_subdomain,
    label_value_errors,
    labels_errors,
    qualified_name_errors,
    toleration_errors,
)
from tests.fakekube import validation

KEYS = {
    "app": True,
    "App_Name-1.x": True,
    "app.kubernetes.io/name": True,
    "example.com/MyName": True,
    "a" * 63: True,
    "x/" + "a" * 63: True,
    "a" * 64: False,
    "bad key!": False,
    "-leading": False,
    "trailing.": False,
    "": False,
    "/name": False,
    "example.com/": False,
    "a/b/c": False,
    "UPPER.example.com/x": False,
    "under_score.com/x": False,
    ("a" * 63 + ".") * 4 + "com/x": False,  # a prefix longer than 253
    "émoji": False,
}
VALUES = {
    "": True,
    "v1": True,
    "My_Value-1.2": True,
    "a" * 63: True,
    "a" * 64: False,
    "has space": False,
    "-leading": False,
    "a/b": False,
    "trailing_": False,
}


@pytest.mark.parametrize("key", list(KEYS))
def test_label_keys_as_the_api_server_checks_them(key: str) -> None:
    assert (not qualified_name_errors(key)) == KEYS[key]
    assert (not validation.is_qualified_name(key)) == KEYS[key], "the fake server agrees"


@pytest.mark.parametrize("value", list(VALUES))
def test_label_values_as_the_api_server_checks_them(value: str) -> None:
    assert (not label_value_errors(value)) == VALUES[value]
    assert (not validation.is_valid_label_value(value)) == VALUES[value], "the fake server agrees"


def test_reasons_name_the_key_in_plain_words() -> None:
    assert labels_errors({"app": "ok", "team": "a b"}) == [
        "the value of 'team' must be empty or letters, digits, '-', '_' or '.', starting and "
        "ending with a letter or digit"
    ]
    assert labels_errors({"a/b/c": "x"}) == [
        "the key 'a/b/c' has more than one '/' (a key is an optional DNS prefix, '/' and a name)"
    ]
    assert labels_errors({"x" * 64: ""}) == [
        f"the key '{'x' * 64}' has a name longer than 63 characters"
    ]


def test_annotation_keys_may_be_upper_case_and_all_fit_in_256_kib() -> None:
    assert annotations_errors({"Example.COM/Note": "x"}) == []
    assert validation.validate_annotations({"Example.COM/Note": "x"}, "a") == []
    assert annotations_errors({"bad key": "x"}) != []
    assert annotations_errors({"note": "x" * (256 * 1024)}) == [
        "together take 262,148 bytes, more than 256 KiB"
    ]
    assert validation.validate_annotations({"note": "x" * (256 * 1024)}, "a") != []
    # Bytes, not characters, on both sides: 100,000 three-byte characters are over the limit.
    assert annotations_errors({"note": "€" * 100_000}) != []
    assert validation.validate_annotations({"note": "€" * 100_000}, "a") != []


TOLERATIONS = [
    ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, set()),
    ({"operator": "Exists"}, set()),  # matches every taint
    ({"key": "gpu", "value": "a100"}, set()),  # an empty operator means Equal
    (
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        set(),
    ),
    ({"key": "bad key", "operator": "Exists"}, {"key"}),
    ({"value": "x"}, {"operator"}),
    ({"key": "gpu", "operator": "Exists", "value": "x"}, {"value"}),
    ({"key": "gpu", "operator": "Equal", "value": "a b"}, {"value"}),
    ({"key": "gpu", "operator": "Gt", "value": "1"}, {"operator"}),
    ({"key": "gpu", "operator": "Exists", "effect": "Sometimes"}, {"effect"}),
    ({"key": "gpu", "operator": "Exists", "tolerationSeconds": 5}, {"effect"}),
    ({"key": 7, "operator": "Exists"}, {"key"}),
    (
        {"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "5"},
        {"tolerationSeconds"},
    ),
    (
        {"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10**30},
        {"tolerationSeconds"},
    ),
]


@pytest.mark.parametrize(("toleration", "refused"), TOLERATIONS)
def test_tolerations_as_the_api_server_checks_them(toleration: dict, refused: set[str]) -> None:
    assert set(toleration_errors(toleration)) == refused
    # The fake's validation sees decoded objects: a wrong type, or a number no int64 holds, is
    # refused by the real server's decoder before validation, so those are not compared.
    seconds = toleration.get("tolerationSeconds")
    decodable = all(isinstance(v, str) for k, v in toleration.items() if k != "tolerationSeconds")
    if decodable and (seconds is None or (isinstance(seconds, int) and abs(seconds) < 2**63)):
        assert bool(validation.validate_tolerations([toleration], "t")) is bool(refused)


def test_object_names() -> None:
    assert is_dns_label("team-a") and not is_dns_label("Team-a") and not is_dns_label("a" * 64)
    assert is_dns_subdomain("sweep.v2-0") and not is_dns_subdomain("sweep_v2")
    assert not is_dns_subdomain("a" * 254)
