"""Deployment checks of our own (`manage.py check --deploy`): settings that work on one machine
and quietly stop working on several."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.caches, deploy=True)
def cache_shared_with_the_broker(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """A broker other processes reach over the network (RabbitMQ) with no REDIS_URL leaves the
    cache a file cache on this machine: login and API throttling and the collapsing of round
    requests would then count per machine."""
    broker = str(settings.CELERY_BROKER_URL)
    if settings.REDIS_URL or broker.startswith(("redis", "rediss", "filesystem", "memory")):
        return []
    scheme = broker.split("://", 1)[0]
    return [
        checks.Warning(
            f"The broker ({scheme}) is shared between machines but the cache is a file cache on "
            "this one, so login and API throttling and round-request collapsing count per "
            "machine.",
            hint="Set REDIS_URL to a Redis that every web and worker machine reaches.",
            id="koordweb.W001",
        )
    ]
