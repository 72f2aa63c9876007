"""All of koordweb's settings, read from the environment (and from `.env` when present).

Every variable is listed in `.env.example`. Production is the default: DEBUG is off and
SECRET_KEY must be given; `make run` writes a development `.env` with DEBUG on. Every value is
checked here, at start-up: a bad one stops the process with one line per problem naming the
variable (`koordweb: KOORDWEB_GPU_SAMPLE_SECONDS='0': must be at least 1`), never a traceback.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


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


# Problems found in the environment; reported together, one line each, at the end of the module.
_problems: list[str] = []
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name).lower()
    if not value:
        return default
    if value not in _TRUE | _FALSE:
        _problems.append(f"{name}={value!r}: expected true or false")
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
        _problems.append(f"{name}={_raw(name)!r}: must be more than {minimum:g}")
        return default
    return value


def _env_number(
    name: str, default: float, kind: type, minimum: float, maximum: float | None
) -> float:
    raw = _raw(name)
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        _problems.append(f"{name}={raw!r}: expected {what}")
        return default
    if value != value or value in (float("inf"), float("-inf")):
        _problems.append(f"{name}={raw!r}: expected a finite number")
        return default
    if value < minimum:
        _problems.append(f"{name}={raw!r}: must be at least {minimum:g}")
        return default
    if maximum is not None and value > maximum:
        _problems.append(f"{name}={raw!r}: must be at most {maximum:g}")
        return default
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = _raw(name) or default
    if value not in choices:
        _problems.append(f"{name}={value!r}: expected one of {', '.join(choices)}")
        return default
    return value


def env_url(name: str, default: str, schemes: tuple[str, ...]) -> str:
    value = _raw(name) or default
    if value and value.partition(":")[0] not in schemes:
        _problems.append(f"{name}={value!r}: expected a URL starting with {' or '.join(schemes)}:")
        return default
    return value


_load_dotenv(BASE_DIR / ".env")
# SQLite, the embedded broker, the file cache, beat's schedule and the demo's logins live here.
VAR_DIR = Path(_raw("KOORDWEB_VAR_DIR") or BASE_DIR / "var").absolute()

TESTING = "pytest" in sys.modules or env_bool("KOORDWEB_TESTING", False)
DEBUG = env_bool("DEBUG", False)

# Commands that serve nothing and keep nothing (a private in-memory database, a trace replay) sign
# nothing that outlives their process: without a SECRET_KEY they run on one made for the process.
OFFLINE_COMMANDS = frozenset({"simulate", "replay_trace"})
COMMAND = sys.argv[1] if len(sys.argv) > 1 and Path(sys.argv[0]).name == "manage.py" else ""

SECRET_KEY = os.environ.get("SECRET_KEY", "")
try:
    if not SECRET_KEY:
        if DEBUG or TESTING:
            SECRET_KEY = "insecure-development-key-only-for-debug-and-tests-" + "x" * 20
        elif COMMAND in OFFLINE_COMMANDS:
            SECRET_KEY = secrets.token_urlsafe(50)
        else:
            raise ImproperlyConfigured(
                "SECRET_KEY must be set when DEBUG is off (see .env.example; `make run` writes one)"
            )
except ImproperlyConfigured as _exc:
    _problems.append(str(_exc))

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
    # A file, not shared-cache memory: worker threads and subprocesses in tests then wait on the
    # writer lock as in production instead of failing with "table is locked".
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
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
        _problems.append(f"KOORDWEB_TRUSTED_PROXIES: {_exc}")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(_raw("STATIC_ROOT") or BASE_DIR / "staticfiles")
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
KOORDWEB_MAX_BODY_BYTES = env_int("KOORDWEB_MAX_BODY_BYTES", 5 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = KOORDWEB_MAX_BODY_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = KOORDWEB_MAX_BODY_BYTES
# Seconds a client is told to wait (Retry-After) when the database, cache or broker is down:
# about the time a restarted PostgreSQL or Redis takes to accept (koordweb/outage.py).
KOORDWEB_OUTAGE_RETRY_AFTER = env_int("KOORDWEB_OUTAGE_RETRY_AFTER", 5, minimum=1)

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
KUBECONFIG = _raw("KUBECONFIG")
# The Kubernetes API budget of each worker, named as kube-scheduler's flags (--kube-api-qps,
# --kube-api-burst), and how many bindings (and evictions) are in flight at once.
KOORDWEB_KUBE_API_QPS = env_float("KOORDWEB_KUBE_API_QPS", 50.0, minimum=0.0, above=True)
KOORDWEB_KUBE_API_BURST = env_int("KOORDWEB_KUBE_API_BURST", 100, minimum=1)
KOORDWEB_KUBE_BIND_PARALLELISM = env_int(
    "KOORDWEB_KUBE_BIND_PARALLELISM", 16, minimum=1, maximum=256
)
if KUBECONFIG and KOORDWEB_BACKEND == "kubernetes" and not Path(KUBECONFIG).is_file():
    _problems.append(f"KUBECONFIG={KUBECONFIG!r}: no such file")
KOORDWEB_SCHEDULER_NAME = _raw("KOORDWEB_SCHEDULER_NAME") or "koordweb"
if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", KOORDWEB_SCHEDULER_NAME):
    _problems.append(
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
        _problems.append(
            f"KOORDWEB_SCHEDULER_PLUGINS: {_name}={_target!r}: expected Name=module:Class"
        )
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
KOORDWEB_WORKER_NAME = _raw("KOORDWEB_WORKER_NAME")
KOORDWEB_QUEUE = _raw("KOORDWEB_QUEUE") or "celery"
KOORDWEB_LEASE_SECONDS = env_float(
    "KOORDWEB_LEASE_SECONDS", max(KOORDWEB_ROUND_INTERVAL / 2, 1.0), minimum=0, above=True
)
CELERY_TASK_DEFAULT_QUEUE = KOORDWEB_QUEUE
CELERY_TASK_ROUTES = ["koordweb.affinity.route_task"]
KOORDWEB_CLUSTER = _raw("KOORDWEB_CLUSTER") or "default"
if not re.fullmatch(r"[-a-zA-Z0-9_]{1,63}", KOORDWEB_CLUSTER):
    _problems.append(f"KOORDWEB_CLUSTER={KOORDWEB_CLUSTER!r}: expected a slug of 1-63 characters")
# The warm snapshot (koordweb/services/warm.py): each cluster's rows kept in the worker between
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
    _problems.append(
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
            "formatter": env_choice(
                "KOORDWEB_LOG_FORMAT", "plain" if DEBUG else "json", ("plain", "json")
            ),
        }
    },
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    },
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# A bad environment stops every process (web, worker, beat, manage.py) here, before anything runs:
# one line per problem, no traceback (gunicorn and celery would print one for an exception). Exit
# status 3 is gunicorn's "worker failed to boot": its master stops instead of forking again.
if _problems:
    for _problem in _problems:
        sys.stderr.write(f"koordweb: {_problem}\n")
    # 2, a command line's refusal; under gunicorn 3, its worker boot error, on which the master
    # stops instead of starting the worker again and again
    raise SystemExit(3 if "gunicorn" in sys.modules else 2)
