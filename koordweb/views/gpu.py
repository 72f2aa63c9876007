"""GPU monitoring pages: the efficiency ranking, and the usage parts of the devices, jobs and
job pages (views stay thin: selectors read, figures draw, `presenters.quantities` words)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from koordweb.figures.gpu_usage import efficiency_bars, idle_trend, job_usage_heatmap
from koordweb.models import Cluster, Job
from koordweb.presenters.quantities import duration_text, gpu_hours_text, percent_text
from koordweb.presenters.words import card_hours_text, card_kind_word, cards_word
from koordweb.selectors.devices import Card
from koordweb.selectors.gpu_usage import (
    IdleFlag,
    Ranked,
    cards_busy,
    cards_now,
    efficiency,
    flagged_idle_jobs,
    idle_flags,
    job_card_usage,
    team_scope,
    unhealthy_cards,
)
from koordweb.selectors.jobs import job_first_requests, jobs_with_quota
from koordweb.views.common import current_cluster
from koordweb.views.nodes import usage_context

WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
RANKINGS = {"idle": "idle GPU-hours", "unused": "unused GPU-hours"}
HEATMAP_VIEWS = {
    "allocation": "allocation",
    "utilisation": "utilisation",
    "idle": "allocated but idle",
}


@dataclass(frozen=True)
class CardShade:
    """What the devices heatmap colours a card by, in the utilisation or idle view."""

    value: int | None
    words: str


def heatmap_view(request: HttpRequest) -> str:
    view = request.GET.get("view", "allocation")
    return view if view in HEATMAP_VIEWS else "allocation"


def card_shades(
    cluster: Cluster,
    cards: list[Card],
    view: str,
    idle_cards: frozenset[tuple[str, int]] = frozenset(),
) -> dict[tuple[str, int], CardShade]:
    """Per card: busy percent now (utilisation), or (idle view; free cards blank) 0 when busy,
    50 when allocated but idle (`idle_cards`, `gpu_usage.cards_idle_now`: the filter's rule),
    100 when every holder has been idle longer than its team's threshold."""
    nodes = {card.node for card in cards}
    now_by_card = cards_now(cluster, nodes)
    if view == "utilisation":
        return {
            (c.node, c.minor): CardShade(
                now_by_card[(c.node, c.minor)].busy_pct
                if (c.node, c.minor) in now_by_card
                else None,
                f"busy {now_by_card[(c.node, c.minor)].busy_pct}% in the last minute"
                if (c.node, c.minor) in now_by_card
                else "no usage report yet",
            )
            for c in cards
        }
    job_ids = {use.job_id for c in cards for use in c.uses if use.job_id}
    flags = idle_flags(jobs_with_quota(job_ids))
    moment = timezone.now()
    shades = {}
    for card in cards:
        holders = [use.job_id for use in card.uses if use.job_id]
        if not holders:
            shades[(card.node, card.minor)] = CardShade(None, "free")
            continue
        if (card.node, card.minor) not in idle_cards:
            shades[(card.node, card.minor)] = CardShade(0, "allocated and busy")
            continue
        card_flags = [flags.get(job_id) for job_id in holders]
        if any(flag is None for flag in card_flags):
            # a holder busy on its other cards: no idle streak of its own, this card idle now
            shades[(card.node, card.minor)] = CardShade(50, "allocated, idle in the last minute")
            continue
        idle = [flag for flag in card_flags if flag is not None]
        minutes = min(flag.idle_minutes(moment) for flag in idle)
        over = all(flag.flagged(moment) for flag in idle)
        shades[(card.node, card.minor)] = CardShade(
            100 if over else 50,
            f"allocated, idle for {duration_text(minutes)}"
            + (" (over its team's threshold)" if over else ""),
        )
    return shades


def idle_words(flag: IdleFlag | None, now: datetime, cards: str = "GPUs") -> dict[str, Any] | None:
    """A job's idle flag for a template: since when, for how long, card-hours lost (in its
    cards' word, `cards` as `card_kind_word` says them), flagged."""
    if flag is None:
        return None
    return {
        "since": flag.idle_since,
        "for": duration_text(flag.idle_minutes(now)),
        "lost": card_hours_text(flag.gpu_hours_lost, cards),
        "flagged": flag.flagged(now),
        "threshold": duration_text(flag.threshold_minutes),
        "cards": cards,
    }


def job_usage_context(job: Job) -> dict[str, Any]:
    """The job page's card usage: its cards over its life, its card-hours, its idle flag, all
    in its cards' word ('NPUs' for an Ascend job, whole cards or AI cores)."""
    usage = job_card_usage(job)
    flag = idle_flags([job]).get(job.id)
    first, _ = job_first_requests([job.id])
    cards = card_kind_word(first.get(job.id) or {})
    return {
        "gpu_cards": cards,
        "gpu_figure": job_usage_heatmap(usage.cards, usage.bucket_starts, usage.busy)
        if usage.cards
        else None,
        "gpu_bucket": duration_text(usage.bucket_seconds // 60),
        "gpu_allocated": card_hours_text(usage.total.allocated, cards),
        "gpu_used": card_hours_text(usage.total.used, cards),
        "gpu_idle": card_hours_text(usage.total.idle_allocated, cards),
        # No sample yet is not 0% efficiency: nothing was measured.
        "gpu_efficiency": percent_text(usage.total.efficiency_pct)
        if usage.total.allocated
        else None,
        "gpu_idle_flag": idle_words(flag, timezone.now(), cards),
    }


def job_idle_words(jobs: list[Job]) -> dict[int, dict[str, Any]]:
    """job id -> idle words, for the jobs list (only jobs idle now), naming the job's cards by
    their kind ('NPUs idle for 2 h, 2.00 NPU-hours lost')."""
    moment = timezone.now()
    flags = idle_flags(jobs)
    first, _ = job_first_requests(flags)
    return {
        job_id: words
        for job_id, flag in flags.items()
        if (words := idle_words(flag, moment, card_kind_word(first.get(job_id) or {}))) is not None
    }


def gpu_health_context(cluster: Cluster, jobs: QuerySet[Job]) -> dict[str, Any]:
    """The overview's card line: the unhealthy cards by name (their count is the overview's
    tile), card utilisation now, the nodes' reported usage against the load-aware thresholds,
    the user's idle-flagged jobs and one word for their cards ('NPUs', or 'cards' when mixed)."""
    count, cards = unhealthy_cards(cluster)
    idle = flagged_idle_jobs(jobs)
    first, _ = job_first_requests(job.id for job in idle)
    return {
        "unhealthy_more": count - len(cards),
        "unhealthy_cards": cards,
        "idle_jobs": idle,
        "idle_cards": cards_word(card_kind_word(first.get(job.id) or {}) for job in idle),
        "cards_busy": cards_busy(cluster),
        "usage": usage_context(cluster),
    }


def _window(request: HttpRequest) -> tuple[str, datetime, datetime]:
    name = request.GET.get("window", "24h")
    name = name if name in WINDOWS else "24h"
    until = parse_datetime(request.GET.get("until", "") or "") or timezone.now()
    if timezone.is_naive(until):
        until = timezone.make_aware(until)
    return name, until - WINDOWS[name], until


@login_required
def efficiency_page(request: HttpRequest) -> HttpResponse:
    """Jobs and teams ranked by wasted (allocated but unused) GPU-hours over a window, underused
    jobs flagged by their team's efficiency threshold, with the waste over time."""
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "efficiency.html", {"cluster": None})
    window, since, until = _window(request)
    quotas = team_scope(request.user)
    rank = request.GET.get("rank", "idle")
    rank = rank if rank in RANKINGS else "idle"
    result = efficiency(cluster, since=since, until=until, quotas=quotas, rank=rank)
    per = "hour" if result.trend_seconds == 3600 else "day"
    context = {
        "cluster": cluster,
        "window": window,
        "windows": list(WINDOWS),
        "rank": rank,
        "rankings": RANKINGS,
        "since": since,
        "until": until,
        "jobs": [_row(r) for r in result.jobs],
        "teams": [_row(r) for r in result.teams],
        "jobs_figure": efficiency_bars(
            [_parts(r) for r in result.jobs[:15]],
            title=f"Jobs with the most {RANKINGS[rank]}",
        )
        if result.jobs
        else None,
        "teams_figure": efficiency_bars(
            [_parts(r) for r in result.teams],
            title="Teams",
        )
        if result.teams
        else None,
        "trend_figure": idle_trend(result.trend_starts, result.trend, per=per)
        if result.teams
        else None,
        "per": per,
    }
    return render(request, "efficiency.html", context)


def _parts(ranked: Ranked) -> tuple[str, float, float, float]:
    hours = ranked.hours
    return (ranked.name, hours.used, hours.idle, hours.underused)


def _row(ranked: Ranked) -> dict[str, Any]:
    return {
        "id": ranked.key,
        "name": ranked.name,
        "team": ranked.team,
        "allocated": gpu_hours_text(ranked.hours.allocated),
        "used": gpu_hours_text(ranked.hours.used),
        "wasted": gpu_hours_text(ranked.hours.wasted),
        "idle": gpu_hours_text(ranked.hours.idle),
        "underused": gpu_hours_text(ranked.hours.underused),
        "efficiency": percent_text(ranked.hours.efficiency_pct),
        "threshold": percent_text(ranked.threshold_pct),
        "flagged": ranked.underused,
    }
