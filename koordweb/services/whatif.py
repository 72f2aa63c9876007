"""What-if: the plan for a hypothetical job on the live state, computed without writing.

The submission is resolved as a real one is (`services.jobs`), its job and pod rows are made by
the same rules and left unsaved, and the engine plans one round with them added
(`koordweb.engine.whatif`: the live snapshot without the jobs the back-off holds). The answer is
what that round decided for the hypothetical job. Jobs, pods and quotas the user may not see are
counted, never named (`koordweb.selectors.redaction`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.utils import timezone

from koordweb.engine.whatif import whatif_plan
from koordweb.models import Job
from koordweb.selectors.redaction import Redactor
from koordweb.services.jobs import ResolvedJob, job_pod_rows, job_row


def _free_name(resolved: ResolvedJob) -> str:
    """The asked name, or a suffixed one when a live job holds it (keeps the pods' keys apart)."""
    spec = resolved.spec
    taken = Job.objects.filter(
        cluster=resolved.cluster, namespace=spec.namespace, name=spec.name
    ).exists()
    return f"{spec.name}-what-if" if taken else spec.name


def job_whatif(*, user: Any, resolved: ResolvedJob) -> dict[str, Any]:
    """The hypothetical job's outcome: placement, why, and whom it would preempt."""
    now = timezone.now()
    name = _free_name(resolved)
    job = job_row(resolved, name=name, now=now)
    pods = job_pod_rows(job, replace(resolved, spec=replace(resolved.spec, name=name)), now)
    plan = whatif_plan(job, pods, now=now)
    job_id, result = plan.job_id, plan.result
    placement = {
        key: result.placements[key].node for key in plan.pod_keys if key in result.placements
    }
    verdict = result.unschedulable.get(job_id)
    preemption = next((p for p in result.preemptions if p.preemptor == job_id), None)
    if len(placement) == len(plan.pod_keys):
        outcome = "placed"
    elif preemption is not None:
        outcome = "preempting"
    else:
        outcome = "unschedulable"
    redactor = Redactor(user)
    # A name already taken is planned under a suffix; the answer uses the name asked for, so it
    # never tells whether someone else's job holds that name.
    asked = f"{resolved.spec.namespace}/{resolved.spec.name}"
    answer: dict[str, Any] = {
        "job": asked,
        "outcome": outcome,
        "feasible": outcome == "placed",
        "placement": {asked + key[len(job_id) :]: node for key, node in placement.items()},
        "decision": redactor.json(result.to_dict()["decisions"].get(job_id)),
        "verdict": redactor.json(verdict.to_dict()) if verdict else None,
        "preemption": None,
    }
    if preemption is not None:
        record = redactor.json(preemption.to_dict())
        record.pop("preemptor", None)  # the hypothetical job itself
        answer["preemption"] = record
    return answer
