"""Suite-wide fixtures; in CI (KOORDWEB_REQUIRE_SERVICES=1) the real services are mandatory."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from django.conf import settings


def pytest_report_header(config: pytest.Config) -> list[str]:
    db = settings.DATABASES["default"]
    return [
        f"koordweb database: {db['ENGINE']} {db.get('HOST') or db.get('NAME')}",
        f"koordweb broker: {settings.CELERY_BROKER_URL.split('@')[-1]}",
        f"koordweb cache: {settings.CACHES['default']['BACKEND']}",
    ]


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("KOORDWEB_REQUIRE_SERVICES") != "1":
        return
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        raise pytest.UsageError(f"CI requires PostgreSQL, DATABASE_URL gives {engine}")
    if not settings.CELERY_BROKER_URL.startswith(("redis", "amqp")):
        raise pytest.UsageError(
            "CI requires a broker server (CELERY_BROKER_URL=redis://... or amqp://...)"
        )


@pytest.fixture
def celery_queue() -> Iterator[str]:
    """A queue of this test's own, so no other worker on a shared broker takes its tasks; it and
    the own queues of the workers the test started leave the broker when the test ends."""
    from koordweb.celery import app
    from koordweb.models import RoundWorker
    from koordweb.worker_queues import worker_queues_remove

    name = f"koordweb-test-{uuid.uuid4().hex[:10]}"
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = name
    try:
        yield name
    finally:
        app.conf.task_default_queue = previous
        queues = [name]
        with contextlib.suppress(Exception):  # a test without the database started no worker
            queues += list(RoundWorker.objects.values_list("queue", flat=True))
        worker_queues_remove(queues)


@pytest.fixture(autouse=True)
def _warm_snapshots_forgotten() -> Iterator[None]:
    """Each test starts with no warm snapshot, no back-off state and no kept engine state in this
    process, and an empty shared cache (the database is rolled back between tests and its ids are
    reused: a state or a cached entry would otherwise outlive its rows and be read as another
    test's)."""
    from koordweb.engine.backoff import backoff_forget
    from koordweb.engine.reads import reads_forget
    from koordweb.engine.warm import warm_forget

    def forget() -> None:
        warm_forget()
        backoff_forget()
        reads_forget()
        _shared_cache_clear()

    forget()
    yield
    forget()


def _shared_cache_clear() -> None:
    """Empty koordweb's part of the shared cache: every key under its prefix on Redis (the broker
    may share the database: its keys stay), the whole cache otherwise (a file or memory cache
    of the test run's own)."""
    from django.core.cache import cache
    from django.core.cache.backends.redis import RedisCache

    if isinstance(cache, RedisCache):
        client = cache._cache.get_client(write=True)
        keys = list(client.scan_iter(match=f"{cache.key_prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    else:
        cache.clear()


# --- Every round a test plans is checked by the oracle (scheduler.oracle) ------------------------
# `plan_round` is wrapped wherever a module holds it; each result is checked with the rules the
# profile's plugins keep, and the test fails at its end on a violation. A test that builds an
# invalid situation on purpose opts out with `@pytest.mark.no_oracle`. Benchmark-sized snapshots
# are not checked.
ORACLE_MAX_NODES = 2_000


class _Oracle:
    """The wrapped `plan_round`, the modules it was put in, and the current test's findings."""

    def __init__(self) -> None:
        import scheduler.round

        self.original: Callable[..., Any] = scheduler.round.plan_round
        self.seen: set[str] = set()
        self.patched: list[tuple[ModuleType, str]] = []
        self.enabled = False
        self.found: list[Any] = []

        @functools.wraps(self.original)
        def plan_round(snapshot: Any, profile: Any = None) -> Any:
            result = self.original(snapshot, profile)
            if self.enabled and len(snapshot.nodes) <= ORACLE_MAX_NODES:
                self.check(snapshot, profile, result)
            return result

        self.wrapper = plan_round

    def check(self, snapshot: Any, profile: Any, result: Any) -> None:
        from scheduler.oracle import check_round, rules_for_plugins
        from scheduler.profile import Profile

        plugins = [spec.name for spec in (profile or Profile.default()).plugins]
        self.found += check_round(snapshot, result, rules_for_plugins(plugins))

    def patch(self) -> None:
        """The wrapper in place of the original in every module imported since the last call."""
        for name, module in list(sys.modules.items()):
            if name in self.seen or module is None:
                continue
            self.seen.add(name)
            attributes = getattr(module, "__dict__", None)
            for attribute, value in list((attributes or {}).items()):
                if value is self.original:
                    setattr(module, attribute, self.wrapper)
                    self.patched.append((module, attribute))

    def restore(self) -> None:
        for module, attribute in self.patched:
            setattr(module, attribute, self.original)


@pytest.fixture(scope="session")
def _oracle() -> Iterator[_Oracle]:
    oracle = _Oracle()
    oracle.patch()
    yield oracle
    oracle.restore()


@pytest.fixture(autouse=True)
def _rounds_checked_by_the_oracle(
    request: pytest.FixtureRequest, _oracle: _Oracle
) -> Iterator[None]:
    """Fail the test when a round it planned breaks a rule of the oracle."""
    _oracle.patch()  # modules imported since the last test
    _oracle.found = []
    _oracle.enabled = request.node.get_closest_marker("no_oracle") is None
    try:
        yield
    finally:
        _oracle.enabled = False
    found, _oracle.found = _oracle.found, []
    if found:
        listed = "\n".join(str(v) for v in found[:20])
        pytest.fail(f"the oracle found {len(found)} violation(s):\n{listed}", pytrace=False)
