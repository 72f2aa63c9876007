"""The Device CR's labels and annotations on its node (partition table and policy), and the
per-pod usage of a NodeMetric (status.podsMetric, for the load-aware assign cache)."""

from django.db import migrations, models

import koordweb.models.fields


class Migration(migrations.Migration):
    dependencies = [
        ("koordweb", "0003_cluster_scheduler_args"),
    ]

    operations = [
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
