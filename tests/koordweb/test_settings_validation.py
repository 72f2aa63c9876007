"""Every setting is checked at start-up: a bad value stops the process with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCAL = "koordweb.settings.local"
PRODUCTION = "koordweb.settings.production"


def check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`manage.py check` on `make run`'s settings, unless `env` names others."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KOORDWEB_", "PYTEST"))}
    base.update(
        DJANGO_SETTINGS_MODULE=LOCAL,
        KOORDWEB_VAR_DIR=str(tmp_path),
        DATABASE_URL="",
        CELERY_BROKER_URL="",
    )
    base.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"KOORDWEB_GPU_SAMPLE_SECONDS": "0"},
            "KOORDWEB_GPU_SAMPLE_SECONDS='0': must be at least 1",
        ),
        ({"KOORDWEB_BACKEND": "k8s"}, "KOORDWEB_BACKEND='k8s': expected one of simulated"),
        ({"KOORDWEB_ROUND_INTERVAL": "soon"}, "KOORDWEB_ROUND_INTERVAL='soon': expected a number"),
        ({"KOORDWEB_AFFINITY": "maybe"}, "KOORDWEB_AFFINITY='maybe': expected true or false"),
        ({"CELERY_BROKER_URL": "redis:/x", "KOORDWEB_LOG_FORMAT": "xml"}, "KOORDWEB_LOG_FORMAT"),
        ({"KOORDWEB_TRUSTED_PROXIES": "10.0.0.0/33"}, "KOORDWEB_TRUSTED_PROXIES"),
        (
            {"DJANGO_SETTINGS_MODULE": PRODUCTION, "DEBUG": "false", "SECRET_KEY": ""},
            "SECRET_KEY must be set",
        ),
        (
            {"DJANGO_SETTINGS_MODULE": PRODUCTION, "DEBUG": "true", "SECRET_KEY": "k" * 60},
            "DEBUG='true': the production settings run with DEBUG off",
        ),
        (
            {"DJANGO_SETTINGS_MODULE": PRODUCTION, "KOORDWEB_HTTPS": "sometimes"},
            "KOORDWEB_HTTPS='sometimes': expected true or false",
        ),
    ],
)
def test_a_bad_setting_is_one_line(tmp_path: Path, env: dict[str, str], line: str) -> None:
    result = check(tmp_path, **env)
    assert result.returncode == 2  # a command line refuses with 2 (3 only under gunicorn)
    assert "Traceback" not in result.stderr
    assert f"koordweb: {line}" in result.stderr
    assert all(row.startswith("koordweb: ") for row in result.stderr.splitlines())


def test_good_settings_start(tmp_path: Path) -> None:
    result = check(tmp_path, KOORDWEB_GPU_SAMPLE_SECONDS="30", KOORDWEB_ROUND_INTERVAL="2.5")
    assert result.returncode == 0, result.stderr


def test_beat_keeps_its_schedule_in_var() -> None:
    from django.conf import settings

    assert Path(settings.CELERY_BEAT_SCHEDULE_FILENAME).parent == settings.VAR_DIR
