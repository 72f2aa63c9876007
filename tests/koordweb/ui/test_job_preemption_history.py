"""The job page's preemption history (issue #37, item 5): each preemption the job made, in order,
with when, the victims evicted, the nominated nodes and what became of it in words (started on
its nominated nodes, preempted again and why, gave up), linking to each preemption's page; and
the preemptions that made it a victim. A tenant reads another team's jobs unnamed."""

from __future__ import annotations

import html as entities
import re
from datetime import timedelta

from django.test import Client
from django.urls import reverse

from koordweb.models import JobState, Preemption
from tests.builders import JobFactory, Pages, PreemptionFactory, VictimFactory

Outcome = Preemption.Outcome


def _three_attempts(ui: Pages) -> list[Preemption]:
    """train-a (team-a) preempted three times: old-b's eviction did not hold (its pods had not
    left), the second gave its nodes up, the third started on its nominated nodes."""
    first, second = ui.preemption, ui.blocked
    at = first.created_at
    Preemption.objects.filter(pk=first.pk).update(
        attempt=1,
        nominations={"default/train-a-0": "node-1", "default/train-a-1": "node-2"},
        outcome=Outcome.PREEMPTED_AGAIN,
        outcome_reason="1 of its victims' pods had not left; it preempted anew.",
        outcome_at=at + timedelta(minutes=1),
    )
    Preemption.objects.filter(pk=second.pk).update(
        attempt=2,
        created_at=at + timedelta(minutes=1),
        outcome=Outcome.GAVE_UP,
        outcome_reason="Its gang's waiting time ran out.",
        outcome_at=at + timedelta(minutes=2),
    )
    third = PreemptionFactory(
        cluster=ui.cluster,
        preemptor=ui.running,
        attempt=3,
        reason="train-a needs block b1",
        nominations={"default/train-a-0": "node-10", "default/train-a-1": "node-9"},
        created_at=at + timedelta(minutes=3),
        outcome=Outcome.STARTED,
        outcome_reason="All 2 pods started on their nominated nodes.",
        outcome_at=at + timedelta(minutes=4),
    )
    mine = JobFactory(
        cluster=ui.cluster, name="mine-a", quota=ui.running.quota, state=JobState.PREEMPTED
    )
    VictimFactory(preemption=third, job=mine, pods=["default/mine-a-0", "default/mine-a-1"])
    VictimFactory(preemption=third, job=ui.preempted, pods=["default/old-b-0"])
    return [Preemption.objects.get(pk=first.pk), Preemption.objects.get(pk=second.pk), third]


def page_text(html: str) -> str:
    """What a person reads: the body's text, tags dropped, spaces collapsed."""
    text = re.sub(r"<script[^>]*>.*?</script>|<[^>]+>", " ", html, flags=re.S)
    return (
        re.sub(r"\s+", " ", entities.unescape(text))
        .replace(" ,", ",")
        .replace(" :", ":")
        .replace("( ", "(")
        .replace(" )", ")")
    )


def _rows(html: str) -> list[tuple[str, str]]:
    return re.findall(r'data-preemption="(\d+)" data-outcome="(\w+)"', html)


def test_the_preemptor_page_lists_each_preemption_in_order_with_its_outcome(
    ui: Pages, as_admin: Client
) -> None:
    first, second, third = _three_attempts(ui)
    html = as_admin.get(reverse("job-detail", args=[ui.running.pk])).content.decode()
    assert _rows(html) == [
        (str(first.pk), "preempted_again"),
        (str(second.pk), "gave_up"),
        (str(third.pk), "started"),
    ]
    for item in (first, second, third):
        assert reverse("preemption-detail", args=[item.pk]) in html
    text = page_text(html)
    assert "This job preempted 3 times, in order" in text
    when = (first.outcome_at or first.created_at).strftime("%Y-%m-%d %H:%M:%S")
    assert (
        f"Preempted again at {when} UTC (preemption 2), because the nodes did not hold: "
        "1 of its victims' pods had not left" in text
    )
    assert "Gave its nominated nodes up at" in text and "waiting time ran out" in text
    assert "Started on its nominated nodes at" in text
    # Victims by name, linked, with the pods evicted; nodes in natural order.
    assert "2 jobs, 3 pods: default/mine-a, default/old-b" in text
    assert reverse("job-detail", args=[ui.preempted.pk]) in html
    assert "node-9, node-10" in text and "node-1, node-2" in text


def test_a_victim_page_says_who_preempted_it_and_when(ui: Pages, as_admin: Client) -> None:
    first, _, third = _three_attempts(ui)
    html = as_admin.get(reverse("job-detail", args=[ui.preempted.pk])).content.decode()
    text = page_text(html)
    assert "This job was a victim of 2 preemptions" in text
    at = first.created_at.strftime("%Y-%m-%d %H:%M:%S")
    assert f"Preempted by default/train-a at {at} UTC" in text
    assert "(its preemption 3)" in text
    assert reverse("preemption-detail", args=[third.pk]) in html
    assert "data-preemptions-made" not in html


def test_a_tenant_reads_the_other_teams_jobs_unnamed(
    ui: Pages, as_alice: Client, as_bob: Client
) -> None:
    _three_attempts(ui)
    # alice (team-a) on her preemptor: bob's old-b is counted, not named.
    text = page_text(as_alice.get(reverse("job-detail", args=[ui.running.pk])).content.decode())
    assert "2 jobs, 3 pods: default/mine-a, another team's job" in text
    assert "old-b" not in text
    # bob (team-b) on his victim: the preemptor is another team's job.
    text = page_text(as_bob.get(reverse("job-detail", args=[ui.preempted.pk])).content.decode())
    assert "Preempted by another team's job at" in text and "train-a" not in text
