"""scheduler/: administrators read and set a cluster's scheduler profile arguments.

The same configuration the Django admin edits (`Cluster.scheduler_args`), for automation: GET
returns it with every argument the plugins accept; PUT replaces it, all or nothing, and refuses
a bad entry with a message naming it (`NetworkTopology.bestFit: expected true or false`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from koordweb.api.base import ApiView
from koordweb.api.permissions import IsAdmin
from koordweb.api.views.clusters import CLUSTER_PARAM, cluster_or_404
from koordweb.models import Cluster
from scheduler.api import ENABLED, check_args, configurable_arguments, problem_lines


class SchedulerConfigUpdateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    scheduler_args = serializers.JSONField(
        help_text='Plugin -> arguments, e.g. {"NetworkTopology": {"bestFit": true}}; {} is '
        'Koordinator\'s reference behaviour. "enabledPlugins": [name, ...] adds registered '
        "out-of-tree plugins (docs/plugins.md), configured under their names the same way."
    )

    def validate_scheduler_args(self, value: Any) -> Any:
        problems = check_args(value, settings.KOORDWEB_SCHEDULER_PLUGINS)
        if problems:
            raise serializers.ValidationError(problem_lines(problems))
        return value


class SchedulerConfigSerializer(SchedulerConfigUpdateSerializer):
    cluster = serializers.CharField()
    arguments = serializers.JSONField(
        help_text="Every plugin and the arguments it takes: kind (bool, int, choice, "
        "per_resource, duration, object, string), minimum, maximum, choices, fields."
    )


def _enabled(cluster: Cluster) -> list[str]:
    enabled = (cluster.scheduler_args or {}).get(ENABLED, [])
    return [str(name) for name in enabled] if isinstance(enabled, list) else []


def _body(cluster: Cluster) -> dict[str, Any]:
    return {
        "cluster": cluster.name,
        "scheduler_args": cluster.scheduler_args or {},
        "arguments": {
            plugin: {name: asdict(arg) for name, arg in args.items()}
            for plugin, args in configurable_arguments(
                settings.KOORDWEB_SCHEDULER_PLUGINS, _enabled(cluster)
            ).items()
        },
    }


class SchedulerConfigView(ApiView):
    permission_classes = [IsAdmin]

    @extend_schema(
        parameters=[CLUSTER_PARAM],
        responses={200: SchedulerConfigSerializer},
        operation_id="scheduler_config_read",
        description="The cluster's scheduler profile arguments and what each plugin accepts.",
    )
    def get(self, request: Request) -> Response:
        return Response(_body(cluster_or_404(request)))

    @extend_schema(
        parameters=[CLUSTER_PARAM],
        request=SchedulerConfigUpdateSerializer,
        responses={200: SchedulerConfigSerializer},
        operation_id="scheduler_config_update",
        description="Replace the cluster's scheduler profile arguments; the next round uses them.",
    )
    def put(self, request: Request) -> Response:
        cluster = cluster_or_404(request)
        body = SchedulerConfigUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        cluster.scheduler_args = body.validated_data["scheduler_args"]
        cluster.save(update_fields=["scheduler_args"])
        return Response(_body(cluster))
