"""Quota edits an admin makes on the quota page: checked, saved and written to the history.

`quota_update` takes the new values in the units the API and the rows use (resource lists as
integers: milli-cores, bytes, cards), checks them as a quota is checked anywhere (the model's
resource-list validators, min never above max, a child's max never above its parent's), refuses
the fields a Kubernetes cluster owns (`services.ownership`: only the idle-alert threshold and the
members are koordweb's there) and records who changed what in a `QuotaChange` row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from koordweb.models import ElasticQuota, QuotaChange
from koordweb.presenters.quantities import quantity_text, resource_name
from koordweb.services.ownership import cluster_owned_refusal

# What the form may change, and nothing else.
EDITABLE_FIELDS = (
    "min",
    "max",
    "shared_weight",
    "max_pending_jobs",
    "max_pending_pods",
    "gpu_idle_alert_minutes",
    "gpu_efficiency_threshold_percent",
)


def _check_limits(quota: ElasticQuota, values: Mapping[str, Any]) -> None:
    # Said in the form's units and words ("Guaranteed memory (700 GiB) is above the maximum
    # (600 GiB)"): the admin typed GiB and cores, never bytes or milli-cores.
    errors: dict[str, list[str]] = {}
    low, high = values.get("min", quota.min) or {}, values.get("max", quota.max) or {}
    for resource, amount in low.items():
        if resource in high and amount > high[resource]:
            errors.setdefault("min", []).append(
                f"Guaranteed {resource_name(resource)} ({quantity_text(resource, amount)}) is "
                f"above the maximum ({quantity_text(resource, high[resource])})."
            )
    parent = quota.parent
    if parent is not None:
        for resource, amount in high.items():
            ceiling = (parent.max or {}).get(resource)
            if ceiling is not None and amount > ceiling:
                errors.setdefault("max", []).append(
                    f"Maximum {resource_name(resource)} ({quantity_text(resource, amount)}) is "
                    f"above the maximum of the parent quota {parent.name} "
                    f"({quantity_text(resource, ceiling)})."
                )
    if errors:
        raise ValidationError(errors)


def quota_update(
    *, quota: ElasticQuota, user: Any, values: Mapping[str, Any]
) -> QuotaChange | None:
    """Save the changed fields of `values` (a subset of EDITABLE_FIELDS) and record the change;
    None when nothing changed. Raises ValidationError with the field's message."""
    unknown = set(values) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValidationError({name: ["cannot be changed here"] for name in sorted(unknown)})
    changed = {name: value for name, value in values.items() if getattr(quota, name) != value}
    if not changed:
        return None
    refusal = cluster_owned_refusal(quota.cluster, ElasticQuota, changed)
    if refusal:
        raise ValidationError({name: [refusal] for name in changed})
    _check_limits(quota, changed)
    before = {name: getattr(quota, name) for name in changed}
    with transaction.atomic():
        for name, value in changed.items():
            setattr(quota, name, value)
        quota.full_clean(exclude=["cluster", "parent", "members"], validate_unique=False)
        quota.save(update_fields=list(changed))
        return QuotaChange.objects.create(
            quota=quota,
            user=user if getattr(user, "pk", None) else None,
            username=getattr(user, "username", "") or "",
            changed_at=timezone.now(),
            changes={name: [before[name], changed[name]] for name in changed},
        )
