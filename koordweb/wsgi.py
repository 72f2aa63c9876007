"""WSGI entry point (gunicorn koordweb.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koordweb.settings")
application = get_wsgi_application()
