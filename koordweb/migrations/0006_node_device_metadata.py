"""The Device CR's labels and annotations on its node (partition table and policy), the per-pod
usage and the aggregated (percentile) usages of a NodeMetric (load-aware), and when a pod was
nominated (the gang waiting time across rounds)."""

from django.db import migrations, models

import koordweb.models.fields


class Migration(migrations.Migration):
    dependencies = [
        ("koordweb", "0005_job_idempotency_fingerprint"),
    ]

    operations = [
        migrations.AddField(
            model_name="nodemetric",
            name="aggregated_usages",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="pod",
            name="nominated_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="nodemetric",
            name="pod_usages",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="node",
            name="device_annotations",
            field=models.JSONField(
                blank=True,
                default=dict,
                validators=[koordweb.models.fields.validate_string_map],
            ),
        ),
        migrations.AddField(
            model_name="node",
            name="device_labels",
            field=models.JSONField(
                blank=True,
                default=dict,
                validators=[koordweb.models.fields.validate_string_map],
            ),
        ),
    ]
