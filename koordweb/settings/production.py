"""The settings of a deployment, and the default of every entry point (manage.py, gunicorn,
celery): DEBUG off, SECRET_KEY required, HTTPS on, static files from collectstatic's manifest, JSON
logs. `manage.py check --deploy` passes on these with the environment docs/operations.md sets.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

from koordweb.settings.base import *  # noqa: F403
from koordweb.settings.base import SECRET_KEY, transport_security
from koordweb.settings.environment import env_bool, problem, raw, stop_on_problems

if env_bool("DEBUG", False):
    problem(
        f"DEBUG={raw('DEBUG')!r}: the production settings run with DEBUG off; for development "
        "set DJANGO_SETTINGS_MODULE=koordweb.settings.local (make run does)"
    )
DEBUG = False

# Commands that serve nothing and keep nothing (a private in-memory database, a trace replay) sign
# nothing that outlives their process: without a SECRET_KEY they run on one made for the process.
OFFLINE_COMMANDS = frozenset({"simulate", "replay_trace"})
COMMAND = sys.argv[1] if len(sys.argv) > 1 and Path(sys.argv[0]).name == "manage.py" else ""
if not SECRET_KEY:
    if COMMAND in OFFLINE_COMMANDS:
        SECRET_KEY = secrets.token_urlsafe(50)
    else:
        problem("SECRET_KEY must be set in production (see .env.example; `make run` writes one)")

globals().update(transport_security(env_bool("KOORDWEB_HTTPS", True)))

stop_on_problems()
