"""All of koordweb's settings, read from the environment (and from `.env` when present).

Every variable is listed in `.env.example`. Production is the default: DEBUG is off and
SECRET_KEY must be given; `make run` writes a development `.env` with DEBUG on.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("KOORDWEB_VAR_DIR", BASE_DIR / "var"))


def _load_dotenv(path: Path) -> None:
    """Fill os.environ from KEY=VALUE lines; the real environment always wins."""
    if not path.is_file():
        return
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        os.environ.setdefault(key.strip(), value.strip().strip("'\""))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


_load_dotenv(BASE_DIR / ".env")

TESTING = "pytest" in sys.modules or env_bool("KOORDWEB_TESTING", False)
DEBUG = env_bool("DEBUG", False)

# Commands that serve nothing and keep nothing (a private in-memory database, a trace replay) sign
# nothing that outlives their process: without a SECRET_KEY they run on one made for the process.
OFFLINE_COMMANDS = frozenset({"simulate", "replay_trace"})
COMMAND = sys.argv[1] if len(sys.argv) > 1 and Path(sys.argv[0]).name == "manage.py" else ""

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if DEBUG or TESTING:
        SECRET_KEY = "insecure-development-key-only-for-debug-and-tests-" + "x" * 20
    elif COMMAND in OFFLINE_COMMANDS:
        SECRET_KEY = secrets.token_urlsafe(50)
    else:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off (see .env.example; `make run` writes one)."
        )

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
    "koordweb.observability.metrics.ApiErrorCountingMiddleware",
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
DATABASE_URL = os.environ.get("DATABASE_URL", "") or f"sqlite:///{VAR_DIR / 'koordweb.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not shared-cache memory: worker threads and subprocesses in tests then wait on the
    # writer lock as in production instead of failing with "table is locked".
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
else:
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("TEST", {})
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Cache: shared by every process (throttling, round collapsing). Redis when REDIS_URL or a redis
# broker is configured, a file cache in var/ otherwise.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "") or "filesystem://"
REDIS_URL = os.environ.get("REDIS_URL", "") or (
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
KOORDWEB_LOGIN_FAILURE_LIMIT = int(os.environ.get("KOORDWEB_LOGIN_FAILURE_LIMIT", "5"))
KOORDWEB_LOGIN_FAILURE_WINDOW = int(os.environ.get("KOORDWEB_LOGIN_FAILURE_WINDOW", "300"))
# Failures per window from one client address, whatever the account (a guesser spraying names).
KOORDWEB_LOGIN_ADDRESS_FAILURE_LIMIT = int(
    os.environ.get("KOORDWEB_LOGIN_ADDRESS_FAILURE_LIMIT", "50")
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
        raise ImproperlyConfigured(f"KOORDWEB_TRUSTED_PROXIES: {_exc}") from None
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if not (DEBUG or TESTING)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEBUG or TESTING

# Request size limits: bodies and uploads over 5 MB are refused before they are parsed.
KOORDWEB_MAX_BODY_BYTES = int(os.environ.get("KOORDWEB_MAX_BODY_BYTES", str(5 * 1024 * 1024)))
DATA_UPLOAD_MAX_MEMORY_SIZE = KOORDWEB_MAX_BODY_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = KOORDWEB_MAX_BODY_BYTES
# Seconds a client is told to wait (Retry-After) when the database, cache or broker is down:
# about the time a restarted PostgreSQL or Redis takes to accept (koordweb/outage.py).
KOORDWEB_OUTAGE_RETRY_AFTER = int(os.environ.get("KOORDWEB_OUTAGE_RETRY_AFTER", "5"))

# Security: production defaults whenever DEBUG is off (tests speak plain HTTP).
HTTPS = env_bool("KOORDWEB_HTTPS", not (DEBUG or TESTING))
SECURE_SSL_REDIRECT = HTTPS
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = 31536000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
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
    "DEFAULT_THROTTLE_RATES": {"user": "1200/min", "anon": "60/min"},
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
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("KOORDWEB_ROUND_SOFT_LIMIT", "120"))
CELERY_TASK_TIME_LIMIT = CELERY_TASK_SOFT_TIME_LIMIT + 30
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
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

KOORDWEB_BACKEND = os.environ.get("KOORDWEB_BACKEND", "simulated")
if KOORDWEB_BACKEND not in {"simulated", "kubernetes"}:
    raise ImproperlyConfigured("KOORDWEB_BACKEND must be 'simulated' or 'kubernetes'.")
KUBECONFIG = os.environ.get("KUBECONFIG", "")
KOORDWEB_SCHEDULER_NAME = os.environ.get("KOORDWEB_SCHEDULER_NAME", "koordweb")
# Out-of-tree scheduler plugins besides those installed with a `koordweb.scheduler_plugins` entry
# point: "Name=module:Class,..." (docs/plugins.md). A cluster enables one in its scheduler_args.
KOORDWEB_SCHEDULER_PLUGINS: dict[str, str] = {
    name.strip(): target.strip()
    for name, _, target in (
        entry.partition("=") for entry in env_list("KOORDWEB_SCHEDULER_PLUGINS", "")
    )
}
KOORDWEB_ROUND_INTERVAL = float(os.environ.get("KOORDWEB_ROUND_INTERVAL", "10"))
# The simulated kubelet keeps an evicted pod on its node this long (a real one: the pod's grace).
KOORDWEB_SIMULATED_GRACE_SECONDS = float(os.environ.get("KOORDWEB_SIMULATED_GRACE_SECONDS", "0"))

# Cluster-affine workers (docs/operations.md, "Several workers"): each cluster's rounds go to the
# queue of the one worker that holds its lease, `<KOORDWEB_QUEUE>.<worker name>`; every worker
# consumes the shared queue KOORDWEB_QUEUE and its own. The worker's name is KOORDWEB_WORKER_NAME,
# else its Celery node name (`--hostname`, celery@<host> by default): unique per worker. A
# worker's heartbeat renews its leases every third of KOORDWEB_LEASE_SECONDS; a lease not renewed
# for that long (a dead worker) is given to a live worker, with a round, by the next heartbeat.
KOORDWEB_AFFINITY = env_bool("KOORDWEB_AFFINITY", True)
KOORDWEB_WORKER_NAME = os.environ.get("KOORDWEB_WORKER_NAME", "")
KOORDWEB_QUEUE = os.environ.get("KOORDWEB_QUEUE", "") or "celery"
KOORDWEB_LEASE_SECONDS = float(
    os.environ.get("KOORDWEB_LEASE_SECONDS", "") or max(KOORDWEB_ROUND_INTERVAL / 2, 1.0)
)
if KOORDWEB_LEASE_SECONDS <= 0:
    raise ImproperlyConfigured("KOORDWEB_LEASE_SECONDS must be positive.")
CELERY_TASK_DEFAULT_QUEUE = KOORDWEB_QUEUE
CELERY_TASK_ROUTES = ["koordweb.affinity.route_task"]
KOORDWEB_CLUSTER = os.environ.get("KOORDWEB_CLUSTER", "default")
# The warm snapshot (koordweb/services/warm.py): each cluster's rows kept in the worker between
# rounds and updated from what changed; checked against a cold build every N rounds (0: never),
# built cold when older than the max age.
KOORDWEB_WARM_SNAPSHOT = env_bool("KOORDWEB_WARM_SNAPSHOT", True)
KOORDWEB_WARM_CHECK_ROUNDS = int(os.environ.get("KOORDWEB_WARM_CHECK_ROUNDS", "100"))
KOORDWEB_WARM_MAX_AGE_SECONDS = float(os.environ.get("KOORDWEB_WARM_MAX_AGE_SECONDS", "600"))
# A difference found by the check fails the round instead of only being logged (CI, debugging).
KOORDWEB_WARM_CHECK_STRICT = env_bool("KOORDWEB_WARM_CHECK_STRICT", False)
# /metrics: loopback scrapes need nothing; others send "Authorization: Bearer <token>".
KOORDWEB_METRICS_TOKEN = os.environ.get("KOORDWEB_METRICS_TOKEN", "")

# GPU monitoring (docs/operations.md): one card sample per period; full resolution for a recent
# window, then one row per hour, then gone. A holder using less than the idle percent of its
# share is idle.
KOORDWEB_GPU_SAMPLE_SECONDS = int(os.environ.get("KOORDWEB_GPU_SAMPLE_SECONDS", "60"))
KOORDWEB_GPU_RAW_HOURS = int(os.environ.get("KOORDWEB_GPU_RAW_HOURS", "24"))
KOORDWEB_GPU_ROLLUP_SECONDS = int(os.environ.get("KOORDWEB_GPU_ROLLUP_SECONDS", "3600"))
KOORDWEB_GPU_HISTORY_DAYS = int(os.environ.get("KOORDWEB_GPU_HISTORY_DAYS", "30"))
KOORDWEB_GPU_IDLE_PERCENT = int(os.environ.get("KOORDWEB_GPU_IDLE_PERCENT", "5"))
KOORDWEB_GPU_METRICS_PER_CARD = env_bool("KOORDWEB_GPU_METRICS_PER_CARD", True)
if KOORDWEB_GPU_ROLLUP_SECONDS % KOORDWEB_GPU_SAMPLE_SECONDS or 3600 % KOORDWEB_GPU_ROLLUP_SECONDS:
    raise ImproperlyConfigured(
        "KOORDWEB_GPU_ROLLUP_SECONDS must be a multiple of KOORDWEB_GPU_SAMPLE_SECONDS and divide "
        "an hour."
    )
# The demo: new jobs arrive on a timer (make run turns this on), now and then a koord-prod one.
KOORDWEB_DEMO_ARRIVALS = env_bool("KOORDWEB_DEMO_ARRIVALS", False)
KOORDWEB_DEMO_ARRIVAL_SECONDS = float(os.environ.get("KOORDWEB_DEMO_ARRIVAL_SECONDS", "20"))

# Logs: one line per event; JSON in production (KOORDWEB_LOG_FORMAT=json|plain), every line of a
# round carrying its round id and cluster.
LOGGING = {
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
            "formatter": os.environ.get("KOORDWEB_LOG_FORMAT", "plain" if DEBUG else "json"),
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
