"""koordweb: the Django project and app: settings, models, services, API, views, tasks."""

from koordweb.celery import app as celery_app

__all__ = ["celery_app"]
