"""What a user may see: admins (is_staff) see everything, a tenant the jobs of their quotas.

A tenant is any authenticated user; their reach is the set of ElasticQuota rows they are a member
of. Every API queryset of jobs, pods, decisions and preemptions starts from these functions, so a
foreign object is simply absent (404), never forbidden (403).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from koordweb.models import ElasticQuota, Job, Preemption, PreemptionVictim


def user_is_admin(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_staff)


def quotas_of_member(*, user: Any) -> QuerySet[ElasticQuota]:
    """The quotas the user may submit into (admins: all of them)."""
    if user_is_admin(user):
        return ElasticQuota.objects.all()
    if user is None or not user.is_authenticated:
        return ElasticQuota.objects.none()
    return ElasticQuota.objects.filter(members=user)


def quota_namespaces(quota: ElasticQuota) -> set[str]:
    """The namespaces a team may submit into with this quota: the quota's own namespace and
    those Koordinator's `quota.scheduling.koordinator.sh/namespaces` annotation lists (a JSON
    array of names; anything else in it is ignored)."""
    return {quota.namespace, *quota.listed_namespaces}


def quota_ids_visible(*, user: Any) -> set[int]:
    """Member quotas and their ancestors (the tree context a tenant needs to read its quota)."""
    quotas = list(ElasticQuota.objects.values_list("id", "parent_id"))
    parent_of = dict(quotas)
    visible: set[int] = set()
    for quota_id in quotas_of_member(user=user).values_list("id", flat=True):
        current: int | None = quota_id
        while current is not None and current not in visible:
            visible.add(current)
            current = parent_of.get(current)
    return visible


def quotas_visible(*, user: Any) -> QuerySet[ElasticQuota]:
    if user_is_admin(user):
        return ElasticQuota.objects.all()
    return ElasticQuota.objects.filter(id__in=quota_ids_visible(user=user))


def jobs_visible(*, user: Any) -> QuerySet[Job]:
    """Jobs the user may read and act on."""
    if user_is_admin(user):
        return Job.objects.all()
    if user is None or not user.is_authenticated:
        return Job.objects.none()
    # A subquery rather than a join, so no DISTINCT is needed and ordering stays cheap.
    return Job.objects.filter(quota__in=ElasticQuota.objects.filter(members=user))


def preemptions_visible(*, user: Any) -> QuerySet[Preemption]:
    """Preemptions whose preemptor or one of whose victims is a job the user can see."""
    if user_is_admin(user):
        return Preemption.objects.all()
    if user is None or not user.is_authenticated:
        return Preemption.objects.none()
    member_quotas = ElasticQuota.objects.filter(members=user)
    victim_of = PreemptionVictim.objects.filter(job__quota__in=member_quotas).values(
        "preemption_id"
    )
    return Preemption.objects.filter(Q(preemptor__quota__in=member_quotas) | Q(id__in=victim_of))
