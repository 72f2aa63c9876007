"""Who changed a quota, what and when: the quota page's change history (issue #37).

One row per saved edit, with each changed field's value before and after as the API writes it
(resource lists as integers: milli-cores, bytes, cards). The user's name is kept as it was, so
the history still reads when the account is gone.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from koordweb.models.workload import ElasticQuota


class QuotaChange(models.Model):
    quota = models.ForeignKey(ElasticQuota, on_delete=models.CASCADE, related_name="changes")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    username = models.CharField(max_length=150, blank=True)
    changed_at = models.DateTimeField()
    # {field: [before, after]}
    changes = models.JSONField(default=dict)

    class Meta:
        ordering = ["-changed_at", "-id"]
        indexes = [models.Index(fields=["quota", "-changed_at"], name="quota_change_when")]

    def __str__(self) -> str:
        return f"{self.quota} changed by {self.username or 'someone'} at {self.changed_at}"
