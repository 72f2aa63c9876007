"""The settings every koordweb process shares, read from the environment (and `.env`).

Not a settings module of its own: `production` (the default), `local` (`make run`) and `test` (the
suite) start from this one and add what differs: DEBUG, the SECRET_KEY fallback, HTTPS and how
static files are served. Every variable is listed in `.env.example` and checked at start-up
(`environment.py`): a bad one stops the process with one line per problem naming the variable
(`koordweb: KOORDWEB_GPU_SAMPLE_SECONDS='0': must be at least 1`), never a traceback.
"""

from __future__ import annotations

import ipaddress
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url

from koordweb.limits import WHATIF_IN_FLIGHT
from koordweb.settings.environment import (
    ROOT,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_url,
    load_dotenv,
    problem,
    raw,
)

BASE_DIR = ROOT
load_dotenv(BASE_DIR / ".env")
# SQLite, the embedded broker, the file cache, beat's schedule and the demo's logins live here.
VAR_DIR = Path(raw("KOORDWEB_VAR_DIR") or BASE_DIR / "var").absolute()

DEBUG = False
# Production's rule; local and test fall back to a development key when it is unset.
SECRET_KEY = os.environ.get("SECRET_KEY", "")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "koordweb",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "koordweb.outage.OutageMiddleware",
    "koordweb.prometheus.metrics.ApiErrorCountingMiddleware",
    "koordweb.hygiene.ControlCharacterMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "koordweb.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "koordweb.urls"
WSGI_APPLICATION = "koordweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "koordweb.views.navigation.cluster_navigation",
            ],
        },
    },
]

# Database: DATABASE_URL, SQLite in var/ by default. SQLite runs in WAL mode with immediate
# transactions so the web server, the worker and beat can share it.
DATABASE_URL = env_url(
    "DATABASE_URL",
    f"sqlite:///{VAR_DIR / 'koordweb.sqlite3'}",
    ("sqlite", "postgres", "postgresql", "pgsql"),
)
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("TEST", {})
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Cache: shared by every process (throttling, round collapsing). Redis when REDIS_URL or a redis
# broker is configured, a file cache in var/ otherwise.
CELERY_BROKER_URL = env_url(
    "CELERY_BROKER_URL",
    "filesystem://",
    ("filesystem", "redis", "rediss", "amqp", "amqps", "pyamqp"),
)
REDIS_URL = env_url("REDIS_URL", "", ("redis", "rediss", "unix")) or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else ""
)
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "koordweb",
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling: after this many failures within the window a user name or client address
# gets 429 until the window passes (counted in the shared cache).
AUTHENTICATION_BACKENDS = ["koordweb.security.RateLimitedModelBackend"]
KOORDWEB_LOGIN_FAILURE_LIMIT = env_int("KOORDWEB_LOGIN_FAILURE_LIMIT", 5, minimum=1)
KOORDWEB_LOGIN_FAILURE_WINDOW = env_int("KOORDWEB_LOGIN_FAILURE_WINDOW", 300, minimum=1)
# Failures per window from one client address, whatever the account (a guesser spraying names).
KOORDWEB_LOGIN_ADDRESS_FAILURE_LIMIT = env_int(
    "KOORDWEB_LOGIN_ADDRESS_FAILURE_LIMIT", 50, minimum=1
)
# Reverse proxies whose X-Forwarded-For is believed (addresses or networks, comma-separated);
# empty: the client address is REMOTE_ADDR and X-Forwarded-For is ignored.
KOORDWEB_TRUSTED_PROXIES = [
    entry.strip()
    for entry in os.environ.get("KOORDWEB_TRUSTED_PROXIES", "").split(",")
    if entry.strip()
]
for _proxy in KOORDWEB_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError as _exc:
        problem(f"KOORDWEB_TRUSTED_PROXIES: {_exc}")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(raw("STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
# Production's: the manifest collectstatic writes (local and test serve from the source folders).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = False

# Request size limits: bodies and uploads over 5 MB are refused before they are parsed.
KOORDWEB_MAX_BODY_BYTES = env_int("KOORDWEB_MAX_BODY_BYTES", 5 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = KOORDWEB_MAX_BODY_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = KOORDWEB_MAX_BODY_BYTES
# What-ifs one team may have computing at once (more: 429 naming the limit; koordweb/limits.py).
KOORDWEB_WHATIF_IN_FLIGHT = env_int("KOORDWEB_WHATIF_IN_FLIGHT", WHATIF_IN_FLIGHT, minimum=1)
# Seconds a client is told to wait (Retry-After) when the database, cache or broker is down:
# about the time a restarted PostgreSQL or Redis takes to accept (koordweb/outage.py).
KOORDWEB_OUTAGE_RETRY_AFTER = env_int("KOORDWEB_OUTAGE_RETRY_AFTER", 5, minimum=1)

# Security. What follows KOORDWEB_HTTPS (on in production, off elsewhere by default) is set by
# each settings module with `transport_security`; the rest holds whatever the transport.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'self'; frame-ancestors 'none'; form-action 'self'"
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "koordweb.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "koordweb.api.renderers.SafeJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # Per user (whichever token), per team (quota) and per anonymous address (api/throttles.py).
    "DEFAULT_THROTTLE_RATES": {"user": "1200/min", "team": "3600/min", "anon": "60/min"},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "koordweb API",
    "DESCRIPTION": "Submit, inspect and explain jobs on a Koordinator-style AI cluster.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {"JobStateEnum": "koordweb.models.workload.JobState"},
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
}
REST_KNOX = {"TOKEN_TTL": timedelta(days=30), "AUTO_REFRESH": False}

# Celery: JSON only, ids as arguments, late acks, one task at a time per process.
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("KOORDWEB_ROUND_SOFT_LIMIT", 120, minimum=1)
CELERY_TASK_TIME_LIMIT = CELERY_TASK_SOFT_TIME_LIMIT + 30
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Beat's state file lives with the other runtime files, not in the directory beat started in.
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# A round whose worker died is redelivered after this long (kombu's default is an hour).
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": CELERY_TASK_TIME_LIMIT * 2
}
if CELERY_BROKER_URL.startswith("filesystem"):
    _broker_dir = VAR_DIR / "broker"
    for _folder in ("out", "processed", "control"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    # Kombu's filesystem transport, each message written whole before a worker can take it.
    CELERY_BROKER_TRANSPORT = "koordweb.broker_files:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "control_folder": str(_broker_dir / "control"),
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
    }

# The backend of the clusters koordweb creates (seed_demo's, import_manifests'); a cluster keeps
# the backend it was created with (the admin changes it). backends.backend_for reads the cluster's.
KOORDWEB_BACKEND = env_choice("KOORDWEB_BACKEND", "simulated", ("simulated", "kubernetes"))
KUBECONFIG = raw("KUBECONFIG")
# The Kubernetes API budget of each worker, named as kube-scheduler's flags (--kube-api-qps,
# --kube-api-burst), and how many bindings (and evictions) are in flight at once.
KOORDWEB_KUBE_API_QPS = env_float("KOORDWEB_KUBE_API_QPS", 50.0, minimum=0.0, above=True)
KOORDWEB_KUBE_API_BURST = env_int("KOORDWEB_KUBE_API_BURST", 100, minimum=1)
KOORDWEB_KUBE_BIND_PARALLELISM = env_int(
    "KOORDWEB_KUBE_BIND_PARALLELISM", 16, minimum=1, maximum=256
)
if KUBECONFIG and KOORDWEB_BACKEND == "kubernetes" and not Path(KUBECONFIG).is_file():
    problem(f"KUBECONFIG={KUBECONFIG!r}: no such file")
KOORDWEB_SCHEDULER_NAME = raw("KOORDWEB_SCHEDULER_NAME") or "koordweb"
if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", KOORDWEB_SCHEDULER_NAME):
    problem(
        f"KOORDWEB_SCHEDULER_NAME={KOORDWEB_SCHEDULER_NAME!r}: expected a DNS subdomain name "
        "(lower-case letters, digits, '-' and '.')"
    )
# Out-of-tree scheduler plugins besides those installed with a `koordweb.scheduler_plugins` entry
# point: "Name=module:Class,..." (docs/plugins.md). A cluster enables one in its scheduler_args.
KOORDWEB_SCHEDULER_PLUGINS: dict[str, str] = {
    name.strip(): target.strip()
    for name, _, target in (
        entry.partition("=") for entry in env_list("KOORDWEB_SCHEDULER_PLUGINS", "")
    )
}
for _name, _target in KOORDWEB_SCHEDULER_PLUGINS.items():
    if not _name or not re.fullmatch(r"[\w.]+:\w+", _target):
        problem(f"KOORDWEB_SCHEDULER_PLUGINS: {_name}={_target!r}: expected Name=module:Class")
KOORDWEB_ROUND_INTERVAL = env_float("KOORDWEB_ROUND_INTERVAL", 10.0, minimum=0, above=True)
# The simulated kubelet keeps an evicted pod on its node this long (a real one: the pod's grace).
KOORDWEB_SIMULATED_GRACE_SECONDS = env_float("KOORDWEB_SIMULATED_GRACE_SECONDS", 0.0, minimum=0)

# Cluster-affine workers (docs/operations.md, "Several workers"): each cluster's rounds go to the
# queue of the one worker that holds its lease, `<KOORDWEB_QUEUE>.<worker name>`; every worker
# consumes the shared queue KOORDWEB_QUEUE and its own. The worker's name is KOORDWEB_WORKER_NAME,
# else its Celery node name (`--hostname`, celery@<host> by default): unique per worker. A
# worker's heartbeat renews its leases every third of KOORDWEB_LEASE_SECONDS; a lease not renewed
# for that long (a dead worker) is given to a live worker, with a round, by the next heartbeat.
KOORDWEB_AFFINITY = env_bool("KOORDWEB_AFFINITY", True)
KOORDWEB_WORKER_NAME = raw("KOORDWEB_WORKER_NAME")
KOORDWEB_QUEUE = raw("KOORDWEB_QUEUE") or "celery"
KOORDWEB_LEASE_SECONDS = env_float(
    "KOORDWEB_LEASE_SECONDS", max(KOORDWEB_ROUND_INTERVAL / 2, 1.0), minimum=0, above=True
)
CELERY_TASK_DEFAULT_QUEUE = KOORDWEB_QUEUE
CELERY_TASK_ROUTES = ["koordweb.affinity.route_task"]
KOORDWEB_CLUSTER = raw("KOORDWEB_CLUSTER") or "default"
if not re.fullmatch(r"[-a-zA-Z0-9_]{1,63}", KOORDWEB_CLUSTER):
    problem(f"KOORDWEB_CLUSTER={KOORDWEB_CLUSTER!r}: expected a slug of 1-63 characters")
# The warm snapshot (koordweb/engine/warm.py): each cluster's rows kept in the worker between
# rounds and updated from what changed; checked against a cold build every N rounds (0: never),
# built cold when older than the max age.
KOORDWEB_WARM_SNAPSHOT = env_bool("KOORDWEB_WARM_SNAPSHOT", True)
KOORDWEB_WARM_CHECK_ROUNDS = env_int("KOORDWEB_WARM_CHECK_ROUNDS", 100, minimum=0)
KOORDWEB_WARM_MAX_AGE_SECONDS = env_float("KOORDWEB_WARM_MAX_AGE_SECONDS", 600.0, minimum=0)
# A difference found by the check fails the round instead of only being logged (CI, debugging).
KOORDWEB_WARM_CHECK_STRICT = env_bool("KOORDWEB_WARM_CHECK_STRICT", False)
# /metrics: loopback scrapes need nothing; others send "Authorization: Bearer <token>".
KOORDWEB_METRICS_TOKEN = os.environ.get("KOORDWEB_METRICS_TOKEN", "")

# GPU monitoring (docs/operations.md): one card sample per period; full resolution for a recent
# window, then one row per hour, then gone. A holder using less than the idle percent of its
# share is idle.
KOORDWEB_GPU_SAMPLE_SECONDS = env_int("KOORDWEB_GPU_SAMPLE_SECONDS", 60, minimum=1)
KOORDWEB_GPU_RAW_HOURS = env_int("KOORDWEB_GPU_RAW_HOURS", 24, minimum=1)
KOORDWEB_GPU_ROLLUP_SECONDS = env_int("KOORDWEB_GPU_ROLLUP_SECONDS", 3600, minimum=1, maximum=3600)
KOORDWEB_GPU_HISTORY_DAYS = env_int("KOORDWEB_GPU_HISTORY_DAYS", 30, minimum=1)
KOORDWEB_GPU_IDLE_PERCENT = env_int("KOORDWEB_GPU_IDLE_PERCENT", 5, minimum=0, maximum=100)
KOORDWEB_GPU_METRICS_PER_CARD = env_bool("KOORDWEB_GPU_METRICS_PER_CARD", True)
if KOORDWEB_GPU_ROLLUP_SECONDS % KOORDWEB_GPU_SAMPLE_SECONDS or 3600 % KOORDWEB_GPU_ROLLUP_SECONDS:
    problem(
        f"KOORDWEB_GPU_ROLLUP_SECONDS={KOORDWEB_GPU_ROLLUP_SECONDS}: must be a multiple of "
        f"KOORDWEB_GPU_SAMPLE_SECONDS ({KOORDWEB_GPU_SAMPLE_SECONDS}) and divide an hour"
    )
# The demo: new jobs arrive on a timer (make run turns this on), now and then a koord-prod one.
KOORDWEB_DEMO_ARRIVALS = env_bool("KOORDWEB_DEMO_ARRIVALS", False)
KOORDWEB_DEMO_ARRIVAL_SECONDS = env_float(
    "KOORDWEB_DEMO_ARRIVAL_SECONDS", 20.0, minimum=0, above=True
)

# Logs: one line per event; JSON in production (KOORDWEB_LOG_FORMAT=json|plain), every line of a
# round carrying its round id and cluster.
LOG_FORMATS = ("plain", "json")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"round": {"()": "koordweb.observability.RoundContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "koordweb.observability.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["round"],
            "formatter": env_choice("KOORDWEB_LOG_FORMAT", "json", LOG_FORMATS),
        }
    },
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    },
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}


def transport_security(https: bool) -> dict[str, Any]:
    """The settings that follow KOORDWEB_HTTPS: secure cookies, HSTS for a year and plain HTTP
    redirected to HTTPS when on; off behind a proxy that terminates TLS without forwarding
    `X-Forwarded-Proto`, and for local runs and tests."""
    return {
        "HTTPS": https,
        "SECURE_SSL_REDIRECT": https,
        "SESSION_COOKIE_SECURE": https,
        "CSRF_COOKIE_SECURE": https,
        "SECURE_HSTS_SECONDS": 31536000 if https else 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": https,
        "SECURE_HSTS_PRELOAD": https,
    }


# What local and test serve static files with: the source folders, no collectstatic needed.
SOURCE_STATIC_FILES = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
