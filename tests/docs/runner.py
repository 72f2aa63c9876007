"""Run a page's shell blocks in order, in one bash with `set -euo pipefail`, and check their output.

The blocks run in a scratch directory that looks like a checkout (every top-level entry of the
repository linked in, but not `var/`, `.env` or `staticfiles/`), with the project's virtualenv off
PATH as on a newcomer's shell. Each block's output is told apart by a marker line, so a failure
names the block (page and line) and expected output is compared with that block's output only.
Every process a page starts runs in the page's own process group, stopped when the page ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.docs.markdown import RUNNABLE, Block, blocks, console_parts, output_matches

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = {".git", "var", ".env", "staticfiles", "test-output", ".mypy_cache", ".ruff_cache"}
MARK = "@@docs-run-block {}@@"
MARKS = re.compile(r"^@@docs-run-block (\d+)@@$", re.MULTILINE)


def scratch_checkout(where: Path) -> Path:
    """A directory that reads like the repository: its entries linked, runtime state left out."""
    where.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name == "pyproject.toml":
            continue
        if entry.name not in LEFT_OUT and not entry.name.startswith("celerybeat-schedule"):
            (where / entry.name).symlink_to(entry)
    # The virtualenv is the repository's own (linked): a doc's `make install` there must find it
    # installed, never reinstall it as an editable install of this scratch copy. So the copy of
    # pyproject.toml is no newer than the virtualenv's stamp.
    pyproject = where / "pyproject.toml"
    shutil.copyfile(ROOT / "pyproject.toml", pyproject)
    stamp = ROOT / ".venv" / ".installed"
    if stamp.exists():
        # In whole nanoseconds and a second older: a float time can round a hair past the
        # stamp, and make would then reinstall the shared virtualenv from this scratch copy.
        when = min(stamp.stat().st_mtime_ns, (ROOT / "pyproject.toml").stat().st_mtime_ns)
        when -= 1_000_000_000
        os.utime(pyproject, ns=(when, when))
    return where


def newcomer_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a fresh shell: no activated virtualenv, no test-only switches."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "PYTHONPATH", "DJANGO_SETTINGS_MODULE"}
        and not key.startswith("PYTEST")
    }
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(extra)
    return env


@dataclass
class Step:
    block: Block
    script: str
    expected: str | None = None


@dataclass
class PageRun:
    steps: list[Step]
    returncode: int
    stdout: str
    stderr: str
    outputs: dict[int, str] = field(default_factory=dict)

    def failure(self) -> str | None:
        """What went wrong, naming the block; None when every block ran and matched."""
        ran = [int(n) for n in MARKS.findall(self.stdout)]
        if self.returncode != 0:
            last = self.steps[ran[-1]].block.where if ran else "before the first block"
            return (
                f"the block at {last} failed (exit {self.returncode})\n--- its stdout:\n"
                f"{self.outputs.get(ran[-1] if ran else -1, '')[-3000:]}\n--- stderr:\n"
                f"{self.stderr[-3000:]}"
            )
        for n, step in enumerate(self.steps):
            if step.expected is not None and not output_matches(step.expected, self.outputs[n]):
                return (
                    f"the block at {step.block.where} printed something else than the page "
                    f"shows\n--- expected:\n{step.expected}\n"
                    f"--- printed:\n{self.outputs[n][-3000:]}"
                )
        return None


def page_steps(
    page: Path, substitutions: Mapping[str, str], *, separate: bool = False
) -> list[Step]:
    """The runnable blocks of a page with their expected output, text substituted: those of the
    page's run, or (`separate`) those the page marks to run apart from it."""
    steps: list[Step] = []
    before: Block | None = None  # the block an expected output belongs to
    for block in blocks(page):
        if block.is_output:
            assert before is not None, f"{block.where}: expected output with no block before it"
            if steps and steps[-1].block is before:
                steps[-1].expected = _substituted(block.text, substitutions)
            continue
        before = block
        if block.skip is not None or (block.separate is not None) != separate:
            continue
        if block.lang in RUNNABLE:
            steps.append(Step(block, _substituted(block.text, substitutions)))
        elif block.lang == "console":
            commands, expected = console_parts(block.text)
            steps.append(
                Step(
                    block,
                    _substituted(commands, substitutions),
                    _substituted(expected, substitutions) if expected.strip() else None,
                )
            )
    return steps


def _substituted(text: str, substitutions: Mapping[str, str]) -> str:
    """Each old text replaced once, longest first, in one pass (a new text is never read again)."""
    if not substitutions:
        return text
    olds = sorted(substitutions, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(old) for old in olds))
    return pattern.sub(lambda match: substitutions[match.group(0)], text)


def run_page(
    page: Path,
    *,
    cwd: Path,
    env: Mapping[str, str],
    substitutions: Mapping[str, str],
    timeout: float,
    preamble: str = "",
    separate: bool = False,
) -> PageRun:
    """Run the page's blocks in order in one bash (those it marks `separate`, when asked);
    stop everything it started, whatever happens."""
    steps = page_steps(page, substitutions, separate=separate)
    script = ["set -euo pipefail", preamble]
    for n, step in enumerate(steps):
        script += [f"printf '\\n{MARK.format(n)}\\n'", step.script]
    process = subprocess.Popen(
        ["bash", "-c", "\n".join(script)],
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(process.pid)
        stdout, stderr = process.communicate()
        stderr += f"\n[docs-run: {page.name} timed out after {timeout:.0f} s]"
    finally:
        stop_group(process.pid)
    run = PageRun(steps, process.returncode, stdout, stderr)
    pieces = MARKS.split(stdout)
    for index in range(1, len(pieces) - 1, 2):
        run.outputs[int(pieces[index])] = pieces[index + 1].lstrip("\n")
    return run


def stop_group(pgid: int, grace: float = 10.0) -> None:
    """SIGTERM a process group, then SIGKILL what is left after `grace` seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
