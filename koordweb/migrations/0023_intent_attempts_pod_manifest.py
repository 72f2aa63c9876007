"""Refused intents are tried again with a back-off, then dropped (Intent.attempts, not_before);
a pod's manifest is kept as the cluster first held it, to create it again exactly (PodManifest)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("koordweb", "0022_pod_owner_kind"),
    ]

    operations = [
        migrations.CreateModel(
            name="PodManifest",
            fields=[
                (
                    "pod",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="manifest",
                        serialize=False,
                        to="koordweb.pod",
                    ),
                ),
                ("document", models.JSONField(default=dict)),
                ("controller", models.CharField(blank=True, max_length=400)),
            ],
        ),
        migrations.AddField(
            model_name="intent",
            name="attempts",
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="intent",
            name="not_before",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
