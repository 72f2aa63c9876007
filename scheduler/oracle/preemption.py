"""Victims of a preemption, by Koordinator's job-level preemption (koordinator.md).

Every victim pod is a bound pod of the snapshot, of one of the record's victim jobs, not
protected (label `scheduling.koordinator.sh/disable-preemptible` = "true" or
`quota.scheduling.koordinator.sh/preemptible` = "false"), and of strictly lower priority than the
preemptor, unless the record's rule is a quota one (InQuota, QuotaReclaim) and it is a reclaim:
the preemptor's quota stays within its min, and the victim's quota is another one using more than
its min.

Victims only where the preemption needed them. For room (rule LowerPriority): Koordinator chooses
victims node by node, on the nodes it nominates the preemptor's pods to; koordweb evicts whole
jobs (koordinator.md: "We differ: a victim is a whole job"), so a victim job's other pods may
stand elsewhere, but every victim job has a victim pod on a node where the record nominates a pod
of the preemptor. For quota (InQuota, QuotaReclaim) the victims free quota, not room, wherever
they run: an InQuota victim is of the preemptor's own quota, a QuotaReclaim victim of another.
"""

from __future__ import annotations

from scheduler.model import PodInfo
from scheduler.oracle.quotas import Amounts, quota_sums, quota_used
from scheduler.oracle.view import RoundView
from scheduler.oracle.violation import VICTIMS, Violation
from scheduler.result import PreemptionRecord
from scheduler.vocabulary import LABEL_DISABLE_PREEMPTIBLE, QUOTA_PREEMPTIBLE

QUOTA_RULES = ("InQuota", "QuotaReclaim")


def protected(pod: PodInfo) -> bool:
    return (
        pod.labels.get(LABEL_DISABLE_PREEMPTIBLE) == "true"
        or pod.labels.get(QUOTA_PREEMPTIBLE) == "false"
    )


def preemptor_pods(view: RoundView, job_id: str) -> list[PodInfo]:
    """The preemptor's pods: its job's, or the pods naming it (a lone pod has no JobInfo)."""
    job = view.jobs.get(job_id)
    if job is not None:
        return [view.pods[k] for k in job.pod_keys if k in view.pods]
    return [p for p in view.snapshot.pods if p.job_id == job_id]


def preemptor_priority(view: RoundView, job_id: str) -> int | None:
    job = view.jobs.get(job_id)
    if job is not None:
        return job.priority
    return max((p.priority for p in preemptor_pods(view, job_id)), default=None)


def _reclaim(view: RoundView, record: PreemptionRecord, victim: PodInfo, used: Amounts) -> bool:
    """A quota within its min taking back from another quota past its min."""
    quotas = {q.name: q for q in view.snapshot.quotas}
    if record.rule not in QUOTA_RULES or victim.quota not in quotas:
        return False
    claim = quota_sums(preemptor_pods(view, record.preemptor))
    if len(claim) != 1:
        return False
    (mine,) = claim
    if mine == victim.quota or mine not in quotas or not quotas[mine].min:
        return False
    floor = quotas[mine].min
    within = all(used[mine][r] + v <= floor[r] for r, v in claim[mine].items() if r in floor)
    theirs = quotas[victim.quota].min
    beyond = any(v > theirs.get(r, 0) for r, v in used[victim.quota].items())
    return within and beyond


def _problem(view: RoundView, record: PreemptionRecord, key: str, used: Amounts) -> str:
    victim = view.pods.get(key)
    if victim is None or victim.node is None:
        return "is not a bound pod"
    if victim.job_id not in record.victim_jobs:
        return f"belongs to {victim.job_id}, not one of the victim jobs"
    if protected(victim):
        return "is protected from preemption"
    if record.rule in QUOTA_RULES:
        quotas = {p.quota for p in preemptor_pods(view, record.preemptor)}
        same = victim.quota is not None and quotas == {victim.quota}
        if same != (record.rule == "InQuota"):
            return (
                f"is of quota {victim.quota or 'none'} and the preemptor of "
                f"{', '.join(sorted(str(q) for q in quotas))}, which rule {record.rule} forbids"
            )
    priority = preemptor_priority(view, record.preemptor)
    if priority is None:
        return f"is evicted for {record.preemptor}, which is not a job of the snapshot"
    if victim.priority >= priority and not _reclaim(view, record, victim, used):
        return (
            f"has priority {victim.priority}, not below the preemptor's {priority}, "
            f"and no quota reclaim allows it (rule {record.rule or 'none'})"
        )
    return ""


def _needless_jobs(view: RoundView, record: PreemptionRecord) -> list[Violation]:
    """Victim jobs of a preemption for room with no victim pod on a node the preemptor is
    nominated to."""
    if record.rule in QUOTA_RULES:
        return []
    targets = set(record.nominations.values())
    needed = {
        pod.job_id
        for key in record.victim_pods
        if (pod := view.pods.get(key)) is not None and pod.node in targets
    }
    return [
        Violation(
            VICTIMS,
            record.preemptor,
            "",
            "",
            f"victim job {job} of {record.preemptor} has no pod on a node the preemptor is "
            f"nominated to ({', '.join(sorted(targets)) or 'none'})",
        )
        for job in record.victim_jobs
        if job not in needed
    ]


def check_victims(view: RoundView) -> list[Violation]:
    found = []
    used = quota_used(view)
    for record in view.result.preemptions:
        found += _needless_jobs(view, record)
        for key in record.victim_pods:
            problem = _problem(view, record, key, used)
            if problem:
                victim = view.pods.get(key)
                found.append(
                    Violation(
                        VICTIMS,
                        record.preemptor,
                        key,
                        victim.node or "" if victim else "",
                        f"victim {key} of {record.preemptor} {problem}",
                    )
                )
    return found
