"""The settings of the test suite (pyproject.toml's DJANGO_SETTINGS_MODULE for pytest), and of
the processes the tests start (web, workers, commands), which inherit it: DEBUG off as Django's
test runner has it, plain HTTP, static files from their source folders, a development key when
SECRET_KEY is unset, and the test database a file of this process.
"""

from __future__ import annotations

import os

from koordweb.settings.base import *  # noqa: F403
from koordweb.settings.base import (
    CACHES,
    DATABASES,
    SECRET_KEY,
    SOURCE_STATIC_FILES,
    STORAGES,
    VAR_DIR,
    transport_security,
)
from koordweb.settings.environment import (
    DEVELOPMENT_SECRET_KEY,
    env_bool,
    stop_on_problems,
)

DEBUG = False
SECRET_KEY = SECRET_KEY or DEVELOPMENT_SECRET_KEY
globals().update(transport_security(env_bool("KOORDWEB_HTTPS", False)))
STORAGES = {**STORAGES, "staticfiles": SOURCE_STATIC_FILES}
WHITENOISE_USE_FINDERS = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not shared-cache memory: worker threads and subprocesses in tests then wait on the
    # writer lock as in production instead of failing with "table is locked".
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}

# One cache per pytest-xdist worker: each worker has its own test database, and a cached entry
# keyed by a row id must never be read by another worker's tests.
if CACHES["default"]["BACKEND"].endswith("FileBasedCache") and os.environ.get(
    "PYTEST_XDIST_WORKER"
):
    CACHES["default"]["LOCATION"] += "-" + os.environ["PYTEST_XDIST_WORKER"]
elif os.environ.get("PYTEST_XDIST_WORKER"):
    CACHES["default"]["KEY_PREFIX"] = (
        CACHES["default"].get("KEY_PREFIX", "") + "-" + os.environ["PYTEST_XDIST_WORKER"]
    )

stop_on_problems()
