"""The koordweb Django application."""

from django.apps import AppConfig


class KoordwebConfig(AppConfig):
    name = "koordweb"
    verbose_name = "koordweb"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from koordweb import checks  # noqa: F401  (registers the deployment checks)
        from koordweb.rows import lookups

        lookups.register()
