"""The Celery application: configuration comes from Django settings (CELERY_* names)."""

from __future__ import annotations

from typing import Any

from celery import Celery

from koordweb.settings.environment import use_settings

# `.env` and DJANGO_SETTINGS_MODULE, production unless the environment or `.env` names others.
use_settings()

app = Celery("koordweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["koordweb"])
# Cluster-affine workers: each worker also consumes its own queue and renews its leases. Named,
# not imported: the step's module asks for rounds through this app.
app.steps["consumer"].add("koordweb.affinity:AffinityStep")

ROUND_TASK = "koordweb.run_round"


def round_task() -> Any:
    """The round task (`koordweb.tasks.run_round`), found by name in the app's registry: the
    modules that ask for rounds never import the tasks module, which imports them. A worker has
    discovered the tasks when it starts; a web process discovers them on its first request."""
    if ROUND_TASK not in app.tasks:
        app.loader.import_default_modules()  # runs `autodiscover_tasks` above
    return app.tasks[ROUND_TASK]


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
