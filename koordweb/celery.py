"""The Celery application: configuration comes from Django settings (CELERY_* names)."""

from __future__ import annotations

from celery import Celery

from koordweb.affinity import AffinityStep
from koordweb.settings.environment import use_settings

# `.env` and DJANGO_SETTINGS_MODULE, production unless the environment or `.env` names others.
use_settings()

app = Celery("koordweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["koordweb"])
# Cluster-affine workers: each worker also consumes its own queue and renews its leases.
app.steps["consumer"].add(AffinityStep)


def _beat_schedule() -> dict[str, dict[str, object]]:
    """Timed rounds; each entry expires after one period so a stalled worker never piles them up."""
    from django.conf import settings

    interval = float(settings.KOORDWEB_ROUND_INTERVAL)
    schedule: dict[str, dict[str, object]] = {
        "scheduling-rounds": {
            "task": "koordweb.tick",
            "schedule": interval,
            "options": {"expires": interval},
        }
    }
    sample = float(settings.KOORDWEB_GPU_SAMPLE_SECONDS)
    schedule["gpu-ingest"] = {
        "task": "koordweb.gpu_ingest",
        "schedule": sample,
        "options": {"expires": sample},
    }
    schedule["gpu-history-compact"] = {
        "task": "koordweb.gpu_history_compact",
        "schedule": 600.0,
        "options": {"expires": 600.0},
    }
    if settings.KOORDWEB_DEMO_ARRIVALS:
        schedule["demo-arrivals"] = {
            "task": "koordweb.demo_arrivals",
            "schedule": settings.KOORDWEB_DEMO_ARRIVAL_SECONDS,
            "options": {"expires": settings.KOORDWEB_DEMO_ARRIVAL_SECONDS},
        }
    return schedule


@app.on_after_configure.connect
def _configure_beat(sender: Celery, **kwargs: object) -> None:
    sender.conf.beat_schedule = _beat_schedule()
