"""Reads for the round history: one row per scheduling round, and one round with its decisions."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from koordweb.models import Cluster, Decision, Job, Preemption, Round


@dataclass
class RoundDetail:
    round: Round
    decisions: list[Decision]
    preemptions: list[Preemption]
    hidden_decisions: int


def round_history(cluster: Cluster) -> QuerySet[Round]:
    """Newest first; callers paginate."""
    return Round.objects.filter(cluster=cluster).order_by("-started_at", "-id")


def round_detail(
    cluster: Cluster, pk: int, *, visible_jobs: QuerySet[Job] | None = None
) -> RoundDetail | None:
    """A round with the decisions and preemptions the viewer may see (None when absent)."""
    found = Round.objects.filter(cluster=cluster, pk=pk).first()
    if found is None:
        return None
    decisions = Decision.objects.filter(round=found).select_related("job__quota")
    preemptions = Preemption.objects.filter(round=found).select_related("preemptor")
    total = decisions.count()
    if visible_jobs is not None:
        ids = visible_jobs.values("pk")
        decisions = decisions.filter(job__in=ids)
        preemptions = preemptions.filter(preemptor__in=ids)
    shown = list(decisions.order_by("-job__priority", "job__submitted_at", "id")[:500])
    return RoundDetail(found, shown, list(preemptions), total - len(shown))
