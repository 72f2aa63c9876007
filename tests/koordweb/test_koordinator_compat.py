"""docs/koordinator-compat.md names every resource, label and annotation key the code declares,
and every plugin argument a cluster's scheduler_args may set."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from koordweb.manifests import scheduler_config
from scheduler import vocabulary
from scheduler.profile import configurable_arguments

DOC = (Path(__file__).resolve().parents[2] / "docs" / "koordinator-compat.md").read_text()
# Where keys are declared: the one vocabulary, and the scheduler ConfigMap's names.
VOCABULARY: tuple[ModuleType, ...] = (vocabulary, scheduler_config)
_KEY = re.compile(r"^[a-z0-9.-]+\.[a-z]+/[A-Za-z0-9._-]+$|^[A-Z][A-Z0-9_]+$")


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)


def declared_keys() -> list[str]:
    found: set[str] = set()
    for module in VOCABULARY:
        for attribute, value in vars(module).items():
            if attribute.startswith("_") or not attribute.isupper():
                continue
            for text in _strings(value):
                if _KEY.match(text) and not text.endswith("/"):
                    found.add(text)
    return sorted(found)


def test_the_vocabulary_is_found() -> None:
    found = declared_keys()
    for expected in (
        "nvidia.com/gpu",
        "huawei.com/npu-core",
        "scheduling.koordinator.sh/gpu-partitions",
        "node.koordinator.sh/gpu-partition-policy",
        "CAMBRICON_DSMLU_PROFILE",
        "gang.scheduling.koordinator.sh/waiting-time",
        "scheduling.koordinator.sh/usage-thresholds",
    ):
        assert expected in found


@pytest.mark.parametrize("key", declared_keys())
def test_every_declared_key_is_documented(key: str) -> None:
    assert key in DOC, f"{key} is declared in the code but missing from docs/koordinator-compat.md"


@pytest.mark.parametrize(
    ("plugin", "argument"),
    sorted((p, a) for p, args in configurable_arguments().items() for a in args),
)
def test_every_plugin_argument_is_documented(plugin: str, argument: str) -> None:
    assert argument in DOC and plugin in DOC, f"{plugin}.{argument}"
