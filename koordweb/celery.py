"""The Celery application: configuration comes from Django settings (CELERY_* names)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koordweb.settings")

app = Celery("koordweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["koordweb"])
