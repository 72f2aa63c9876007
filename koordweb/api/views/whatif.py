"""whatif/: the plan for a job on the live state, from the same body as a submission."""

from __future__ import annotations

import logging

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response

from koordweb.api.base import ApiView
from koordweb.api.serializers.submission import JobSubmissionSerializer
from koordweb.api.throttles import WHATIF_THROTTLES, whatif_in_flight
from koordweb.services.jobs import job_spec_resolve
from koordweb.services.whatif import job_whatif

logger = logging.getLogger("koordweb.api")


class EngineUnavailable(APIException):
    status_code = 503
    default_detail = "The scheduling engine could not plan this job; try again later."
    default_code = "engine_unavailable"


class WhatIfPreemptionSerializer(serializers.Serializer):  # type: ignore[type-arg]
    victim_jobs = serializers.ListField(child=serializers.CharField())
    other_tenants_victim_jobs = serializers.IntegerField()
    victim_pods = serializers.ListField(child=serializers.CharField())
    other_tenants_victim_pods = serializers.IntegerField()
    nominations = serializers.DictField(child=serializers.CharField())
    reason = serializers.CharField(allow_blank=True)
    cost = serializers.JSONField()


class WhatIfSerializer(serializers.Serializer):  # type: ignore[type-arg]
    job = serializers.CharField(help_text="The hypothetical job's id (namespace/name).")
    outcome = serializers.ChoiceField(["placed", "preempting", "unschedulable"])
    feasible = serializers.BooleanField()
    placement = serializers.DictField(child=serializers.CharField(), help_text="pod -> node")
    decision = serializers.JSONField(allow_null=True, help_text="Why here: domain, alternatives.")
    verdict = serializers.JSONField(allow_null=True, help_text="Why not: code, reason, details.")
    preemption = WhatIfPreemptionSerializer(allow_null=True)


class EngineUnavailableSerializer(serializers.Serializer):  # type: ignore[type-arg]
    detail = serializers.CharField()


class WhatIfView(ApiView):
    # Each answer runs a round's work: a budget per user and per team besides the API's, and a
    # bound on a team's what-ifs computing at once (429 naming the limit).
    throttle_classes = WHATIF_THROTTLES

    @extend_schema(
        request=JobSubmissionSerializer,
        responses={200: WhatIfSerializer, 503: EngineUnavailableSerializer},
        operation_id="whatif_create",
        description="Plan a job on the live state without submitting it: where it would run, "
        "or why not, and which jobs it would preempt. Nothing is written.",
    )
    def post(self, request: Request) -> Response:
        body = JobSubmissionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        resolved = job_spec_resolve(user=request.user, spec=body.to_spec())
        with whatif_in_flight(request.user):
            try:
                plan = job_whatif(user=request.user, resolved=resolved)
            except Exception as exc:
                # An engine failure is ours, not the caller's: log it, answer JSON, not a bare
                # 500.
                logger.exception("what-if planning failed")
                raise EngineUnavailable() from exc
        return Response(WhatIfSerializer(plan).data)
