"""The shape of a job's explanation (documented for the schema; built by selectors.jobs)."""

from __future__ import annotations

from rest_framework import serializers


class DetailLineSerializer(serializers.Serializer):  # type: ignore[type-arg]
    item = serializers.CharField(help_text="What the line is about, e.g. 'Room per domain'.")
    text = serializers.CharField()


class DecisionExplanationSerializer(serializers.Serializer):  # type: ignore[type-arg]
    round = serializers.IntegerField()
    outcome = serializers.CharField()
    reason = serializers.CharField(allow_blank=True, help_text="The engine's own message.")
    reason_code = serializers.CharField(help_text="The case, e.g. topology, quota, placed.")
    sentence = serializers.CharField(help_text="The decision in plain words.")
    details_text = DetailLineSerializer(many=True, help_text="The details, formatted.")
    counterfactual = serializers.JSONField(allow_null=True)
    details = serializers.JSONField()
    decided_at = serializers.DateTimeField()


class PlacementExplanationSerializer(serializers.Serializer):  # type: ignore[type-arg]
    pods = serializers.DictField(child=serializers.CharField(), help_text="pod -> node")
    domain = serializers.CharField(allow_null=True, help_text="e.g. BlockLayer/b1")
    offer_slots = serializers.IntegerField(allow_null=True)
    desired_offer_slots = serializers.IntegerField(allow_null=True)
    alternatives = serializers.DictField(
        child=serializers.IntegerField(), help_text="Candidate domain -> its offer slots."
    )
    reason = serializers.CharField(allow_blank=True)
    sentence = serializers.CharField(help_text="Why here, in plain words.")


class PreemptionExplanationSerializer(serializers.Serializer):  # type: ignore[type-arg]
    preemption = serializers.IntegerField()
    preemptor = serializers.CharField(
        allow_null=True, help_text="The preempting job; null when it is another team's."
    )
    preemptor_priority = serializers.IntegerField(help_text="The priority it preempted with.")
    state = serializers.CharField()
    rule = serializers.CharField(
        allow_null=True,
        help_text="The engine's rule: LowerPriority (lower-priority jobs), InQuota (lower-priority"
        " jobs of the preemptor's quota), QuotaReclaim (quota other quotas borrowed beyond their"
        " min); null for a record that does not say.",
    )
    reason = serializers.CharField(
        allow_blank=True,
        help_text="The engine's words for why the preemptor did not fit without evicting; empty"
        " when the preemptor is another team's job (it may name that team's quota).",
    )
    sentence = serializers.CharField(help_text="The rule and the reason in plain words.")
    cost = serializers.JSONField()
    pods = serializers.JSONField()
    freed = serializers.JSONField()
    at = serializers.DateTimeField()


class JobExplanationSerializer(serializers.Serializer):  # type: ignore[type-arg]
    job = serializers.IntegerField()
    state = serializers.CharField()
    state_reason = serializers.CharField(allow_blank=True)
    why_pending = DecisionExplanationSerializer(allow_null=True)
    why_here = PlacementExplanationSerializer(allow_null=True)
    why_preempted = PreemptionExplanationSerializer(many=True)
    latest_decision = DecisionExplanationSerializer(allow_null=True)
