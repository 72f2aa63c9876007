"""The guides run as written: every shell block of README.md, docs/api.md, docs/plugins.md and
docs/operations.md, in order, with `set -euo pipefail`, output checked where a page shows it.

README, api and plugins run against the demo `make run` starts (a scratch checkout on loopback
ports, SQLite and the embedded broker in its own `var/`); operations.md's production runbook runs
in another scratch checkout on the machine's PostgreSQL (a database of its own, dropped after) and
Redis (a database number of its own), under gunicorn with DEBUG off. Its fake-cluster recipe
(`<!-- docs-run: separate (...) -->`: a demo on SQLite and the embedded broker) runs alone, in a
fresh checkout with no service. A page that drifts from the code fails here, naming the block.
Blocks that cannot run on one machine carry `<!-- docs-run: skip (reason) -->` in the page.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.docs.markdown import KNOWN, RUNNABLE, blocks
from tests.docs.runner import ROOT, newcomer_env, run_page, scratch_checkout, stop_group

pytestmark = pytest.mark.slow
DEMO_PAGES = ("README.md", "docs/api.md", "docs/plugins.md")
RUNBOOK_PAGE = "docs/operations.md"
PAGES = (*DEMO_PAGES, RUNBOOK_PAGE)
needs_tools = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("curl", "jq", "make")), reason="needs curl, jq, make"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_clone(where: Path) -> Path:
    """A checkout as a fresh clone has it: the code (koordweb/ and manage.py copied, so settings
    find `.env`, `var/` and `staticfiles/` here), everything else linked, no runtime state."""
    scratch_checkout(where)
    for name in ("koordweb", "manage.py"):
        (where / name).unlink()
    shutil.copytree(
        ROOT / "koordweb", where / "koordweb", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy2(ROOT / "manage.py", where / "manage.py")
    return where


def clean_env(**extra: str) -> dict[str, str]:
    """A newcomer's shell: none of koordweb's settings from the test run's environment."""
    env = newcomer_env({})
    for key in list(env):
        if key.startswith(("KOORDWEB_", "CELERY_", "DJANGO_")) or key in {
            "DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS", "STATIC_ROOT",
            "KUBECONFIG", "LOG_LEVEL", "CSRF_TRUSTED_ORIGINS",
        }:  # fmt: skip
            del env[key]
    env.update(extra)
    return env


def wait_for(url: str, seconds: float, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"`make run` exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"the demo did not answer {url} within {seconds} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """`make run` in a fresh clone, on a free loopback port; stopped with everything it started."""
    checkout = fresh_clone(tmp_path_factory.mktemp("demo") / "koordweb")
    port = free_port()
    log = checkout.parent / "make-run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["make", "run"],
            cwd=checkout,
            env=clean_env(KOORDWEB_PORT=str(port), KOORDWEB_DEMO_ARRIVALS="false"),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(f"http://127.0.0.1:{port}/login/", 120, process, log)
        yield checkout, port
    finally:
        stop_group(process.pid)
        process.wait(timeout=30)


def test_every_block_is_tagged_and_every_skip_says_why() -> None:
    for page in PAGES:
        for block in blocks(ROOT / page):
            assert block.lang in KNOWN, f"{block.where}: tag the block (one of {sorted(KNOWN)})"
            for reason in (block.skip, block.separate):
                if reason is not None:
                    assert reason.startswith("(") and len(reason) > 4, block.where
    runnable = [b for page in PAGES for b in blocks(ROOT / page) if b.lang in RUNNABLE]
    assert sum(b.skip is None for b in runnable) >= 25


@needs_tools
@pytest.mark.parametrize("page", DEMO_PAGES)
def test_the_page_runs_against_the_demo(demo: tuple[Path, int], page: str) -> None:
    checkout, port = demo
    run = run_page(
        ROOT / page,
        cwd=checkout,
        env=clean_env(),
        substitutions={"127.0.0.1:8000": f"127.0.0.1:{port}"},
        timeout=240,
    )
    failure = run.failure()
    assert failure is None, failure


def service_url(variable: str, default: str) -> str:
    url = os.environ.get(variable, "")
    return url if url.startswith(default.partition(":")[0]) else default


def reachable(url: str) -> bool:
    parsed = urlparse(url)
    try:
        socket.create_connection((parsed.hostname, parsed.port), timeout=3).close()
    except OSError:
        return False
    return True


@needs_tools
def test_the_production_runbook_serves_the_ui_under_gunicorn(tmp_path: Path) -> None:
    """operations.md from a fresh clone: PostgreSQL, Redis, migrate, collectstatic, first admin,
    gunicorn with DEBUG off, worker, beat, logs, upgrade; then the rest of the page."""
    postgres = service_url("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    redis = service_url("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    if not (reachable(postgres) and reachable(redis)):
        if os.environ.get("KOORDWEB_REQUIRE_SERVICES") == "1":
            pytest.fail("the runbook needs PostgreSQL and Redis")
        pytest.skip("the runbook needs PostgreSQL and Redis")
    import psycopg

    database = f"koordweb_docs_{secrets.token_hex(4)}"
    server = urlparse(postgres)._replace(path="/postgres").geturl()
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{database}"')
    checkout = fresh_clone(tmp_path / "koordweb")
    redis_base = urlparse(redis)._replace(path="").geturl()
    try:
        run = run_page(
            ROOT / RUNBOOK_PAGE,
            cwd=checkout,
            env=clean_env(),
            substitutions={
                "postgres://koordweb@127.0.0.1:5432/koordweb": urlparse(postgres)
                ._replace(path=f"/{database}")
                .geturl(),
                "redis://127.0.0.1:6379/0": f"{redis_base}/14",
                "redis://127.0.0.1:6379/1": f"{redis_base}/15",
                "127.0.0.1:8000": f"127.0.0.1:{free_port()}",
            },
            timeout=240,
        )
    finally:
        with psycopg.connect(server, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    failure = run.failure()
    assert failure is None, failure
    assert (checkout / "staticfiles" / "staticfiles.json").is_file()
    assert not list(checkout.glob("celerybeat-schedule*")), "beat wrote into the checkout"


@needs_tools
def test_the_fake_cluster_recipe_binds_pods_on_the_fake_api_server(tmp_path: Path) -> None:
    """operations.md's recipe from a fresh clone: the demo exported, the fake API server seeded
    with it, a kubernetes-backend demo of its own in var/kube whose worker binds pods there."""
    checkout = fresh_clone(tmp_path / "koordweb")
    fake = free_port()
    run = run_page(
        ROOT / RUNBOOK_PAGE,
        cwd=checkout,
        env=clean_env(),
        substitutions={"--port 8001": f"--port {fake}", "127.0.0.1:8001": f"127.0.0.1:{fake}"},
        timeout=240,
        separate=True,
    )
    failure = run.failure()
    assert failure is None, failure
    assert run.steps, "the page marks no block `separate`"
    assert not reachable(f"http://127.0.0.1:{fake}"), "the fake API server outlived the page"
