"""Redaction: other teams' jobs, pods and quotas are counted, never named, in what a tenant reads.

Decision details, counterfactuals, what-if answers, round metrics and preemption records are
plain JSON the engine writes about the whole cluster. Every answer that carries them passes them
through one `Redactor`, built for the viewer: admins see everything; a tenant sees the jobs and
pods of their quotas and the quotas they may read (their own and the ancestors). Lists of job or
pod names keep the visible ones and say how many others there were; maps keyed by quota or pod
keep the visible keys. The API applies it through `koordweb.api.fields.RedactedJSONField`.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from koordweb.models import Pod
from koordweb.selectors.tenancy import jobs_visible, quotas_visible, user_is_admin

# Lists of job ids (a gang id "ns/name", or a gang group "ns/a,ns/b") -> the count's key.
JOB_LISTS = {"evict_jobs": "other_tenants_jobs", "victim_jobs": "other_tenants_victim_jobs"}
# Lists of pod keys ("ns/name") -> the count's key.
POD_LISTS = {"victim_pods": "other_tenants_victim_pods"}
# Maps keyed by quota name ({quota: {resource: amount}}).
QUOTA_MAPS = {"runtime_quota", "quota_increase", "quota_shortfall"}
# Maps keyed by pod key ({"ns/name": reason}).
POD_MAPS = {"dropped"}


class Redactor:
    """What one viewer may see named; `json()` returns a redacted copy of engine output."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self.sees_all = user_is_admin(user)

    @cached_property
    def jobs(self) -> set[str]:
        rows = jobs_visible(user=self.user).values_list("namespace", "name")
        return {f"{namespace}/{name}" for namespace, name in rows}

    @cached_property
    def pods(self) -> set[str]:
        rows = Pod.objects.filter(job__in=jobs_visible(user=self.user)).values_list(
            "namespace", "name"
        )
        return {f"{namespace}/{name}" for namespace, name in rows}

    @cached_property
    def quotas(self) -> set[str]:
        return set(quotas_visible(user=self.user).values_list("name", flat=True))

    def job_visible(self, job_id: str) -> bool:
        """A gang group is visible only when every gang in it is."""
        return self.sees_all or set(str(job_id).split(",")) <= self.jobs

    def job_name(self, job_id: str) -> str | None:
        return job_id if self.job_visible(job_id) else None

    def pod_visible(self, key: str) -> bool:
        return self.sees_all or key in self.pods

    def quota_visible(self, name: str) -> bool:
        return self.sees_all or name in self.quotas

    def json(self, value: Any) -> Any:
        """A copy of `value`; for admins the same content (with zero counts added)."""
        if isinstance(value, list):
            return [self.json(item) for item in value]
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in JOB_LISTS and isinstance(item, list):
                shown = [name for name in item if self.job_visible(str(name))]
                out[key] = shown
                out[JOB_LISTS[key]] = len(item) - len(shown)
            elif key in POD_LISTS and isinstance(item, list):
                shown = [name for name in item if self.pod_visible(str(name))]
                out[key] = shown
                out[POD_LISTS[key]] = len(item) - len(shown)
            elif key in QUOTA_MAPS and isinstance(item, dict):
                out[key] = {name: v for name, v in item.items() if self.quota_visible(name)}
            elif key in POD_MAPS and isinstance(item, dict):
                out[key] = {name: v for name, v in item.items() if self.pod_visible(name)}
            else:
                out[key] = self.json(item)
        return out


def preemption_cost_unnamed(cost: dict[str, Any] | None) -> dict[str, Any]:
    """A preemption's cost for a reader who may not see its preemptor: without the cause of the
    preemptor's failure (it may name the preemptor's quota, as its reason does)."""
    return {key: value for key, value in (cost or {}).items() if key != "cause"}
