"""Limits per team on an ElasticQuota (issue #36): how many jobs and pods may wait at once, and
Kubernetes' PodTolerationRestriction (allowed and default tolerations). Existing quotas take the
defaults: 500 waiting jobs, 8,192 waiting pods, any toleration, none added."""

from django.db import migrations, models

import koordweb.models.workload


class Migration(migrations.Migration):
    dependencies = [
        ("koordweb", "0019_deleted_rows_logged_per_statement"),
    ]

    operations = [
        migrations.AddField(
            model_name="elasticquota",
            name="allowed_tolerations",
            field=models.JSONField(
                blank=True,
                help_text="Tolerations this team's pods may carry (Kubernetes spelling); "
                "null: any, []: none.",
                null=True,
                validators=[koordweb.models.workload.validate_toleration_list],
            ),
        ),
        migrations.AddField(
            model_name="elasticquota",
            name="default_tolerations",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Tolerations added to every pod this team submits (Kubernetes spelling).",
                validators=[koordweb.models.workload.validate_toleration_list],
            ),
        ),
        migrations.AddField(
            model_name="elasticquota",
            name="max_pending_jobs",
            field=models.PositiveIntegerField(
                default=500, help_text="Jobs of this quota that may wait for a placement at once."
            ),
        ),
        migrations.AddField(
            model_name="elasticquota",
            name="max_pending_pods",
            field=models.PositiveIntegerField(
                default=8192, help_text="Pods of this quota's waiting jobs, all together."
            ),
        ),
    ]
