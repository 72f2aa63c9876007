"""Reads for the round history: one row per scheduling round, and one round with its decisions."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from koordweb.models import Cluster, Decision, Job, Round


@dataclass
class RoundDetail:
    round: Round
    decisions: list[Decision]
    hidden_decisions: int  # about jobs the viewer may not see
    more_decisions: int = 0  # visible, beyond the page's limit
    visible_decisions: int = 0  # all the viewer may see (the pages' count)


def round_history(cluster: Cluster) -> QuerySet[Round]:
    """Newest first; callers paginate."""
    return Round.objects.filter(cluster=cluster).order_by("-started_at", "-id")


def round_cluster(pk: int) -> Cluster | None:
    """The cluster a round belongs to (its page shows that cluster, whichever was chosen)."""
    found = Round.objects.filter(pk=pk).select_related("cluster").first()
    return found.cluster if found else None


def round_detail(
    cluster: Cluster,
    pk: int,
    *,
    visible_jobs: QuerySet[Job] | None = None,
    offset: int = 0,
    limit: int = 500,
) -> RoundDetail | None:
    """A round with the decisions the viewer may see (None when absent); its preemptions are
    the ledger's (`selectors.preemptions.preemption_list(round_id=...)`)."""
    found = Round.objects.filter(cluster=cluster, pk=pk).first()
    if found is None:
        return None
    decisions = Decision.objects.filter(round=found).select_related("job__quota")
    total = decisions.count()
    if visible_jobs is not None:
        ids = visible_jobs.values("pk")
        decisions = decisions.filter(job__in=ids)
    visible = decisions.count()
    ordered = decisions.order_by("-job__priority", "job__submitted_at", "id")
    shown = list(ordered[offset : offset + limit])
    return RoundDetail(
        found,
        shown,
        hidden_decisions=total - visible,
        more_decisions=max(0, visible - offset - len(shown)),
        visible_decisions=visible,
    )
