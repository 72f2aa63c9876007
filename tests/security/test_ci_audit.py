"""`.ci/audit` decides pass/fail from pip-audit's report; pip-audit itself is replaced by a stub
that writes a given report, since the real service is often unreachable from CI machines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

AUDIT = Path(__file__).resolve().parents[2] / ".ci" / "audit"


def run_audit(tmp_path: Path, report: dict | None, stderr: str = "", ci: bool = False) -> Any:
    stub = tmp_path / "bin" / "pip-audit"
    stub.parent.mkdir(exist_ok=True)
    body = json.dumps(report) if report is not None else ""
    stub.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "out = sys.argv[sys.argv.index('--output') + 1]\n"
        f"open(out, 'w').write({body!r})\n"
        f"sys.stderr.write({stderr!r})\n"
        f"sys.exit({1 if report is None or stderr else 0})\n"
    )
    stub.chmod(0o755)
    env = {**os.environ, "KOORDWEB_VENV": str(tmp_path)}
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    return subprocess.run([str(AUDIT)], env=env, capture_output=True, text=True, timeout=60)


CLEAN = {"dependencies": [{"name": "django", "version": "5.2.19", "vulns": []}]}
VULNERABLE = {
    "dependencies": [
        {
            "name": "django",
            "version": "5.2.1",
            "vulns": [{"id": "PYSEC-2099-1", "fix_versions": ["5.2.2"]}],
        }
    ]
}
ALL_NOT_FOUND = {
    "dependencies": [
        {"name": "django", "skip_reason": "Dependency not found on PyPI and could not be audited"}
    ]
}


@pytest.mark.parametrize("ci", [False, True])
def test_clean_passes(tmp_path: Path, ci: bool) -> None:
    done = run_audit(tmp_path, CLEAN, ci=ci)
    assert done.returncode == 0, done.stdout
    assert "1 packages audited" in done.stdout


@pytest.mark.parametrize("ci", [False, True])
def test_vulnerabilities_fail(tmp_path: Path, ci: bool) -> None:
    done = run_audit(tmp_path, VULNERABLE, stderr="", ci=ci)
    assert done.returncode == 1
    assert "PYSEC-2099-1" in done.stdout and "5.2.2" in done.stdout


@pytest.mark.parametrize(("ci", "code"), [(False, 0), (True, 1)])
def test_unreachable_service_fails_only_in_ci(tmp_path: Path, ci: bool, code: int) -> None:
    for report, stderr in (
        (None, "requests.exceptions.ConnectionError: Max retries exceeded"),
        (ALL_NOT_FOUND, ""),
    ):
        done = run_audit(tmp_path, report, stderr=stderr, ci=ci)
        assert done.returncode == code, done.stdout
        assert "NOT AUDITED" in done.stdout
