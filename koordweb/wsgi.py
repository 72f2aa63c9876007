"""WSGI entry point (gunicorn koordweb.wsgi): the production settings unless
DJANGO_SETTINGS_MODULE (in the environment or `.env`) names others."""

from django.core.wsgi import get_wsgi_application

from koordweb.settings.environment import use_settings

use_settings()
try:
    application = get_wsgi_application()
except SystemExit as refusal:
    # Settings that cannot start exit 2 after one line per problem. Under gunicorn a worker's
    # exit 3 is "worker failed to boot", on which the master stops instead of starting the worker
    # again and again.
    if refusal.code == 2:
        raise SystemExit(3) from None
    raise
