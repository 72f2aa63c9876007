"""One settings module per way of running koordweb: production (the default of every entry
point), local (`make run`) and test, each read in a fresh interpreter as the process would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEYS = [
    "DEBUG",
    "HTTPS",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SESSION_COOKIE_SECURE",
    "WHITENOISE_USE_FINDERS",
    "KOORDWEB_DEMO_ARRIVALS",
]
SECRET = "s" * 30 + "e" * 30


def clean_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """No koordweb settings from the test run; var/ of the test's own; set-but-empty values so a
    developer's .env cannot fill them."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KOORDWEB_", "PYTEST", "DJANGO_")) and k != "DEBUG"
    }
    base.update(
        KOORDWEB_VAR_DIR=str(tmp_path),
        DATABASE_URL="",
        CELERY_BROKER_URL="",
        REDIS_URL="",
        SECRET_KEY="",
        DEBUG="",
        KOORDWEB_HTTPS="",
        KOORDWEB_DEMO_ARRIVALS="",
        KOORDWEB_LOG_FORMAT="",
    )
    base.update(env)
    return base


def read(module: str, env: dict[str, str], prelude: str = "") -> dict[str, Any]:
    script = (
        f"{prelude}import json, importlib; s = importlib.import_module({module!r}); "
        f"v = {{k: getattr(s, k) for k in {KEYS!r}}}; "
        "v['staticfiles'] = s.STORAGES['staticfiles']['BACKEND']; "
        "v['log_format'] = s.LOGGING['handlers']['console']['formatter']; "
        "v['secret_key'] = s.SECRET_KEY; v['test_db'] = s.DATABASES['default'].get('TEST'); "
        "print(json.dumps(v))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    values: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return values


def test_production_is_secure_whoever_imports_it(tmp_path: Path) -> None:
    # pytest imported first, as a test run has it: production stays production.
    env = clean_env(tmp_path, SECRET_KEY=SECRET)
    values = read("koordweb.settings.production", env, prelude="import pytest; ")
    assert values["DEBUG"] is False
    assert values["HTTPS"] and values["SECURE_SSL_REDIRECT"] and values["SESSION_COOKIE_SECURE"]
    assert values["SECURE_HSTS_SECONDS"] == 365 * 86400
    assert values["staticfiles"].endswith("CompressedManifestStaticFilesStorage")
    assert values["WHITENOISE_USE_FINDERS"] is False
    assert values["log_format"] == "json"
    assert values["KOORDWEB_DEMO_ARRIVALS"] is False
    assert values["secret_key"] == SECRET


def test_production_turns_https_off_behind_a_proxy_that_does_not_forward_it(
    tmp_path: Path,
) -> None:
    env = clean_env(tmp_path, SECRET_KEY=SECRET, KOORDWEB_HTTPS="false")
    values = read("koordweb.settings.production", env)
    assert not values["HTTPS"] and not values["SECURE_SSL_REDIRECT"]
    assert values["SECURE_HSTS_SECONDS"] == 0


def test_local_is_make_runs_demo(tmp_path: Path) -> None:
    values = read("koordweb.settings.local", clean_env(tmp_path))
    assert values["DEBUG"] is True
    assert not values["HTTPS"] and not values["SECURE_SSL_REDIRECT"]
    assert values["staticfiles"].endswith(".StaticFilesStorage")
    assert values["WHITENOISE_USE_FINDERS"] is True
    assert values["log_format"] == "plain"
    assert values["KOORDWEB_DEMO_ARRIVALS"] is True
    assert values["secret_key"].startswith("insecure-development-key")


def test_local_keeps_every_variable_working(tmp_path: Path) -> None:
    env = clean_env(
        tmp_path,
        DEBUG="false",
        SECRET_KEY=SECRET,
        KOORDWEB_HTTPS="true",
        KOORDWEB_DEMO_ARRIVALS="false",
        KOORDWEB_LOG_FORMAT="json",
    )
    values = read("koordweb.settings.local", env)
    assert values["DEBUG"] is False
    assert values["HTTPS"] and values["SECURE_SSL_REDIRECT"]
    assert values["KOORDWEB_DEMO_ARRIVALS"] is False
    assert values["log_format"] == "json"
    assert values["secret_key"] == SECRET


def test_test_settings_speak_plain_http_on_a_database_file_of_their_own(tmp_path: Path) -> None:
    values = read("koordweb.settings.test", clean_env(tmp_path))
    assert values["DEBUG"] is False
    assert not values["HTTPS"]
    assert values["WHITENOISE_USE_FINDERS"] is True
    assert values["test_db"]["NAME"].startswith(str(tmp_path / "test-"))
    assert values["secret_key"].startswith("insecure-development-key")


@pytest.mark.parametrize(
    ("dotenv", "environment", "chosen"),
    [
        ("", None, "koordweb.settings.production"),
        ("DJANGO_SETTINGS_MODULE=koordweb.settings.local\n", None, "koordweb.settings.local"),
        (
            "DJANGO_SETTINGS_MODULE=koordweb.settings.local\n",
            "koordweb.settings.production",
            "koordweb.settings.production",
        ),
    ],
)
def test_entry_points_take_the_module_from_the_environment_then_dotenv_then_production(
    tmp_path: Path, dotenv: str, environment: str | None, chosen: str
) -> None:
    (tmp_path / ".env").write_text(dotenv)
    env = clean_env(tmp_path)
    if environment:
        env["DJANGO_SETTINGS_MODULE"] = environment
    # The module alone: `import koordweb` would already choose from the checkout's own .env.
    module = ROOT / "koordweb" / "settings" / "environment.py"
    script = (
        "import os, pathlib, importlib.util as u; "
        f"spec = u.spec_from_file_location('environment', {str(module)!r}); "
        "m = u.module_from_spec(spec); spec.loader.exec_module(m); "
        f"m.use_settings(pathlib.Path({str(tmp_path / '.env')!r})); "
        "print(os.environ['DJANGO_SETTINGS_MODULE'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == chosen


def test_gunicorn_is_told_the_worker_failed_to_boot(tmp_path: Path) -> None:
    """A refused environment exits 2 from a command, 3 from the WSGI module (gunicorn's "worker
    failed to boot": its master stops instead of starting the worker again and again)."""
    env = clean_env(tmp_path, DJANGO_SETTINGS_MODULE="koordweb.settings.production")
    done = subprocess.run(
        [sys.executable, "-c", "import koordweb.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3
    assert done.stderr.strip() == (
        "koordweb: SECRET_KEY must be set in production (see .env.example; `make run` writes one)"
    )
