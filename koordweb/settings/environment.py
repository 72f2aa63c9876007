"""Reading settings from the environment: the `.env` file, typed values, and the problems found.

Every settings module (base, production, local, test) reads its values through these helpers.
A bad value is not an exception: it is noted as one line naming the variable and the module's
default is kept, so that every problem of an environment is reported at once, when the settings
module ends with `stop_on_problems()`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The repository (or image) root: manage.py, `.env` and var/ live here.
ROOT = Path(__file__).resolve().parent.parent.parent
# What `DJANGO_SETTINGS_MODULE` is when neither the environment nor `.env` names one.
DEFAULT_SETTINGS_MODULE = "koordweb.settings.production"
# Used only when SECRET_KEY is unset, by the local and test settings; production refuses to start.
DEVELOPMENT_SECRET_KEY = "insecure-development-key-only-for-local-and-tests-" + "x" * 20

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# Problems found so far, one line each, in the order found; a variable read twice (a settings
# module overriding base's default) is reported once.
problems: list[str] = []


def problem(line: str) -> None:
    if line not in problems:
        problems.append(line)


def load_dotenv(path: Path = ROOT / ".env") -> None:
    """Fill os.environ from KEY=VALUE lines; the real environment always wins."""
    if not path.is_file():
        return
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        os.environ.setdefault(key.strip(), value.strip().strip("'\""))


def use_settings(dotenv: Path = ROOT / ".env") -> None:
    """For the entry points (manage.py, wsgi, celery): `.env` read, then the settings module it or
    the environment names, production otherwise."""
    load_dotenv(dotenv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", DEFAULT_SETTINGS_MODULE)


def raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def env_bool(name: str, default: bool) -> bool:
    value = raw(name).lower()
    if not value:
        return default
    if value not in _TRUE | _FALSE:
        problem(f"{name}={value!r}: expected true or false")
        return default
    return value in _TRUE


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_int(name: str, default: int, *, minimum: int, maximum: int | None = None) -> int:
    """A whole number within bounds; the default when unset (a bad value is a problem)."""
    return int(_env_number(name, default, int, minimum, maximum))


def env_float(name: str, default: float, *, minimum: float, above: bool = False) -> float:
    """A number of at least `minimum` (above it, when `above`); the default when unset."""
    value = _env_number(name, default, float, minimum, None)
    if above and value <= minimum:
        problem(f"{name}={raw(name)!r}: must be more than {minimum:g}")
        return default
    return value


def _env_number(
    name: str, default: float, kind: type, minimum: float, maximum: float | None
) -> float:
    text = raw(name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        problem(f"{name}={text!r}: expected {what}")
        return default
    if value != value or value in (float("inf"), float("-inf")):
        problem(f"{name}={text!r}: expected a finite number")
        return default
    if value < minimum:
        problem(f"{name}={text!r}: must be at least {minimum:g}")
        return default
    if maximum is not None and value > maximum:
        problem(f"{name}={text!r}: must be at most {maximum:g}")
        return default
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = raw(name) or default
    if value not in choices:
        problem(f"{name}={value!r}: expected one of {', '.join(choices)}")
        return default
    return value


def env_url(name: str, default: str, schemes: tuple[str, ...]) -> str:
    value = raw(name) or default
    if value and value.partition(":")[0] not in schemes:
        problem(f"{name}={value!r}: expected a URL starting with {' or '.join(schemes)}:")
        return default
    return value


def stop_on_problems() -> None:
    """The last line of every settings module: a bad environment stops the process (web, worker,
    beat, manage.py) here, before anything runs, with one line per problem and no traceback
    (gunicorn and celery would print one for an exception). Exit status 2, a command line's
    refusal; koordweb/wsgi.py turns it into gunicorn's 3."""
    if not problems:
        return
    for line in problems:
        sys.stderr.write(f"koordweb: {line}\n")
    raise SystemExit(2)
