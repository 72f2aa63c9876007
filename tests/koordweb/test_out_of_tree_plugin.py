"""The guide's out-of-tree plugin package, installed on its own into a fresh virtualenv, is found
through its `koordweb.scheduler_plugins` entry point, enabled by a cluster's scheduler args and
changes where `manage.py simulate` places pods; without the package the same args are refused
by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "prefer-label-plugin"
CLUSTER = EXAMPLE / "cluster.yaml"
ENABLED = {"enabledPlugins": ["PreferLabel"], "PreferLabel": {"label": "disk", "value": "ssd"}}
LABELLED = {"node-c", "node-d"}


def _run(python: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SECRET_KEY": "plugin-test-" + "k" * 40, "PIP_NO_INPUT": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


def _simulate(python: Path | str, scheduler_args: dict[str, object]) -> dict[str, str]:
    done = _run(
        python,
        "manage.py",
        "simulate",
        str(CLUSTER),
        "--scheduler-args",
        json.dumps(scheduler_args),
    )
    assert done.returncode == 0, done.stderr
    final: dict[str, str] = json.loads(done.stdout)["final"]
    return final


@pytest.fixture(scope="module")
def plugin_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv holding only the example package; the project's environment (Django,
    numpy, koordweb) is reached behind it, as a site directory of its own."""
    venv = tmp_path_factory.mktemp("plugin") / "venv"
    made = _run(sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv))
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    project = sysconfig.get_paths()["purelib"]
    (Path(purelib.stdout.strip()) / "koordweb-project.pth").write_text(
        f"import site; site.addsitedir({project!r})\n"
    )
    installed = _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        str(EXAMPLE),
    )
    assert installed.returncode == 0, installed.stderr
    return python


def test_the_installed_plugin_is_enabled_by_scheduler_args_and_moves_pods(
    plugin_python: Path,
) -> None:
    default = _simulate(plugin_python, {})
    preferred = _simulate(plugin_python, ENABLED)
    assert set(default) == set(preferred) == {"default/web-1", "default/web-2"}
    assert set(default.values()) == {"node-a"}  # equal room everywhere: the name decides
    assert preferred != default
    assert set(preferred.values()) <= LABELLED


def test_the_same_args_are_refused_by_name_where_the_package_is_not_installed() -> None:
    done = _run(
        sys.executable,
        "manage.py",
        "simulate",
        str(CLUSTER),
        "--scheduler-args",
        json.dumps(ENABLED),
    )
    assert done.returncode == 2
    assert "enabledPlugins[0]: unknown plugin 'PreferLabel'" in done.stderr
