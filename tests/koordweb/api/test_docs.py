"""docs/api.md: every curl example runs, in order, against a live test server and succeeds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.cache import cache

from koordweb.services.tokens import token_create

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"
BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def curl_blocks() -> list[str]:
    return [block for block in BLOCK.findall(DOC.read_text()) if "$KOORDWEB" in block]


def test_the_guide_has_examples_for_every_area():
    text = "\n".join(curl_blocks())
    for endpoint in [
        "jobs/",
        "explain/",
        "whatif/",
        "cancel/",
        "topology/",
        "quotas/tree/",
        "nodes/",
        "devices/",
        "rounds/",
        "preemptions/",
        "tokens/",
        "usage/",
        "gpu/efficiency/",
        "gpu/cards/",
    ]:
        assert endpoint in text, endpoint


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="needs curl and jq")
def test_curl_examples_run_against_a_live_server(live_server, world, tmp_path):
    cache.add(f"round-requested:{world.cluster.pk}", "test", timeout=300)  # no real Celery task
    _, token = token_create(user=world.alice)
    _, admin_token = token_create(user=world.admin)
    script = "set -euo pipefail\n" + "\n".join(curl_blocks())
    env = {**os.environ, "KOORDWEB": live_server.url, "TOKEN": token, "ADMIN_TOKEN": admin_token}
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "submitted job" in result.stdout
    assert '"outcome"' in result.stdout
    assert '"bert-0"' in result.stdout  # the YAML submission answered with its pods
