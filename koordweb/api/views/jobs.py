"""jobs/: submit (JSON or a Kubernetes manifest), list, inspect, cancel and explain jobs."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from koordweb.api.base import ApiMixin
from koordweb.api.filters import JobFilter
from koordweb.api.parsers import JSON_AND_YAML_PARSERS, JSON_PARSERS, YAMLText
from koordweb.api.serializers.explain import JobExplanationSerializer
from koordweb.api.serializers.jobs import JobDetailSerializer, JobOutputSerializer
from koordweb.api.serializers.submission import JobSubmissionSerializer
from koordweb.models import Job
from koordweb.selectors.jobs import job_detail_queryset, job_explain, job_list
from koordweb.services.idempotency import IdempotencyKeyReused
from koordweb.services.jobs import JobConflict, job_cancel, job_submit

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="Retry-safe submissions: the same key (per user) with the same body returns the "
    "original job (200); with a different body, 422.",
)
MAX_IDEMPOTENCY_KEY = 128


class ConflictSerializer(serializers.Serializer):  # type: ignore[type-arg]
    detail = serializers.CharField()


def idempotency_key(request: Request) -> str | None:
    key = request.headers.get("Idempotency-Key", "").strip()
    if not key:
        return None
    if len(key) > MAX_IDEMPOTENCY_KEY or not key.isprintable():
        raise serializers.ValidationError(
            {"Idempotency-Key": [f"at most {MAX_IDEMPOTENCY_KEY} printable characters"]}
        )
    return key


class JobViewSet(
    ApiMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Job]
):
    filterset_class = JobFilter
    ordering_fields = ["submitted_at", "priority", "name", "state", "id"]
    ordering = ["-submitted_at", "-id"]

    def get_queryset(self) -> Any:
        if self.action in {"retrieve", "explain"}:
            return job_detail_queryset(user=self.request.user)
        return job_list(user=self.request.user)

    def get_serializer_class(self) -> Any:
        if self.action == "retrieve":
            return JobDetailSerializer
        return JobOutputSerializer

    def get_parsers(self) -> list[Any]:
        # Only submissions accept YAML; self.action is not set yet when parsers are chosen.
        if self.request is not None and self.request.method == "POST" and self.kwargs == {}:
            return [parser() for parser in JSON_AND_YAML_PARSERS]
        return [parser() for parser in JSON_PARSERS]

    @extend_schema(
        request={
            "application/json": JobSubmissionSerializer,
            "application/yaml": OpenApiTypes.STR,
        },
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            201: JobDetailSerializer,
            200: OpenApiResponse(JobDetailSerializer, "Replay of an Idempotency-Key"),
            422: OpenApiResponse(ConflictSerializer, "Idempotency-Key reused with another body"),
        },
        description="Submit a job (a gang of `replicas` pods of one shape). A Kubernetes "
        "manifest (Content-Type: application/yaml) is accepted too.",
    )
    def create(self, request: Request) -> Response:
        key = idempotency_key(request)
        try:
            if isinstance(request.data, YAMLText):
                from koordweb.api.views.manifest_submission import submit_manifest

                job, created = submit_manifest(
                    request=request, text=request.data, idempotency_key=key
                )
            else:
                body = JobSubmissionSerializer(data=request.data)
                body.is_valid(raise_exception=True)
                job, created = job_submit(
                    user=request.user, spec=body.to_spec(), idempotency_key=key
                )
        except IdempotencyKeyReused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
        detailed = job_detail_queryset(user=request.user).filter(pk=job.pk).first()
        if detailed is None:
            # A replay after the submitter lost sight of the job (it left the job's quota).
            raise NotFound("the job this Idempotency-Key created is no longer visible to you")
        return Response(
            JobDetailSerializer(detailed, context=self.get_serializer_context()).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        request=None,
        responses={200: JobOutputSerializer, 409: ConflictSerializer},
        description="Cancel an active job; a finished job answers 409.",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        try:
            cancelled = job_cancel(job=job, user=request.user)
        except JobConflict as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(JobOutputSerializer(job_list(user=request.user).get(pk=cancelled.pk)).data)

    @extend_schema(responses={200: JobExplanationSerializer})
    @action(detail=True, methods=["get"])
    def explain(self, request: Request, pk: str | None = None) -> Response:
        """Why pending, why here, why preempted."""
        job = self.get_object()
        return Response(JobExplanationSerializer(job_explain(job=job, user=request.user)).data)
