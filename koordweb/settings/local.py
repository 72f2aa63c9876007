"""The settings of `make run` (koordweb.settings.local): the demo on one machine, on the embedded
defaults (SQLite, the file broker, a file cache, all in var/), with DEBUG on, plain HTTP, static
files from their source folders, plain-text logs and demo jobs arriving on a timer.
"""

from __future__ import annotations

from koordweb.settings.base import *  # noqa: F403
from koordweb.settings.base import (
    LOG_FORMATS,
    LOGGING,
    SECRET_KEY,
    SOURCE_STATIC_FILES,
    STORAGES,
    transport_security,
)
from koordweb.settings.environment import (
    DEVELOPMENT_SECRET_KEY,
    env_bool,
    env_choice,
    stop_on_problems,
)

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = SECRET_KEY or DEVELOPMENT_SECRET_KEY
globals().update(transport_security(env_bool("KOORDWEB_HTTPS", False)))
STORAGES = {**STORAGES, "staticfiles": SOURCE_STATIC_FILES}
WHITENOISE_USE_FINDERS = True
LOGGING["handlers"]["console"]["formatter"] = env_choice(
    "KOORDWEB_LOG_FORMAT", "plain" if DEBUG else "json", LOG_FORMATS
)
KOORDWEB_DEMO_ARRIVALS = env_bool("KOORDWEB_DEMO_ARRIVALS", True)

stop_on_problems()
