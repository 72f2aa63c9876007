"""GPU usage: a card's history, a job's usage over its life, and team efficiency (tenant-scoped:
a tenant sees their own teams' jobs; other tenants' holders of a card are not named)."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from koordweb.api.base import ApiMixin, ApiView
from koordweb.api.serializers.gpu_usage import (
    CardHistoryQuery,
    CardSampleSerializer,
    EfficiencySerializer,
    JobUsageSerializer,
    WindowQuery,
)
from koordweb.api.views.clusters import CLUSTER_PARAM, cluster_or_404
from koordweb.models import CardSample
from koordweb.selectors.gpu_usage import (
    card_history,
    efficiency,
    idle_flags,
    job_card_usage,
    team_scope,
)
from koordweb.selectors.jobs import job_list


class CardHistoryView(ApiMixin, ListAPIView):  # type: ignore[type-arg]
    serializer_class = CardSampleSerializer

    @extend_schema(
        parameters=[CLUSTER_PARAM, CardHistoryQuery],
        description="A node's card samples (one row per holder per period, 60 s raw or 1 h once "
        "downsampled), oldest first; at most 31 days, the last 24 h by default.",
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # the schema generator asks without a query
            return CardSample.objects.none()
        query = CardHistoryQuery(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        return card_history(
            cluster_or_404(self.request),
            node=params["node"],
            minor=params.get("minor"),
            since=params["since"],
            until=params["until"],
        )

    def get_serializer_context(self) -> dict[str, Any]:
        scope = team_scope(self.request.user)
        teams = None if scope is None else set(scope.values_list("id", flat=True))
        return {**super().get_serializer_context(), "teams": teams}


class JobUsageView(ApiView):
    @extend_schema(
        responses={200: JobUsageSerializer},
        description="A job's cards over its life (percent of its share busy per time bucket), "
        "its GPU-hours, and whether its cards are idle now (`idle_since`).",
    )
    def get(self, request: Request, pk: int) -> Response:
        job = job_list(user=request.user).filter(pk=pk).first()
        if job is None:
            raise Http404("No such job.")
        usage = job_card_usage(job)
        flag = idle_flags([job]).get(job.id)
        data = {
            "job": job.id,
            "totals": usage.total,
            "idle_since": flag.idle_since if flag else None,
            "idle_gpu_hours_so_far": flag.gpu_hours_lost if flag else None,
            "idle_flagged": bool(flag and flag.flagged(timezone.now())),
            "bucket_seconds": usage.bucket_seconds,
            "times": usage.bucket_starts,
            "cards": [
                {"card": card, "busy_percent": row}
                for card, row in zip(usage.cards, usage.busy, strict=True)
            ],
        }
        return Response(JobUsageSerializer(data).data)


class TeamEfficiencyView(ApiView):
    @extend_schema(
        parameters=[CLUSTER_PARAM, WindowQuery, OpenApiParameter("until", str)],
        responses={200: EfficiencySerializer},
        description="Teams and jobs ranked by idle-allocated GPU-hours over a window (24h, 7d, "
        "30d), with the idle GPU-hours per team per hour (24h) or day; tenants see their teams.",
    )
    def get(self, request: Request) -> Response:
        query = WindowQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        until, since = query.validated_data["until"], query.validated_data["since"]
        result = efficiency(
            cluster_or_404(request), since=since, until=until, quotas=team_scope(request.user)
        )
        return Response(EfficiencySerializer(result).data)
