"""Rounds numbered per cluster (Round.number: ids are shared by every cluster, so a cluster's
ids skip), the existing rows numbered in the order they started; and the quota change history
(QuotaChange: who changed what when)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def number_rounds(apps, schema_editor):
    Round = apps.get_model("koordweb", "Round")
    counts: dict[int, int] = {}
    batch = []
    rows = Round.objects.order_by("cluster_id", "started_at", "id").only("id", "cluster_id")
    for row in rows.iterator(chunk_size=2000):
        counts[row.cluster_id] = counts.get(row.cluster_id, 0) + 1
        row.number = counts[row.cluster_id]
        batch.append(row)
        if len(batch) >= 2000:
            Round.objects.bulk_update(batch, ["number"])
            batch = []
    if batch:
        Round.objects.bulk_update(batch, ["number"])


class Migration(migrations.Migration):
    dependencies = [
        ("koordweb", "0023_intent_attempts_pod_manifest"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="round",
            name="number",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(number_rounds, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="round",
            constraint=models.UniqueConstraint(
                fields=("cluster", "number"), name="uniq_round_number"
            ),
        ),
        migrations.CreateModel(
            name="QuotaChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("username", models.CharField(blank=True, max_length=150)),
                ("changed_at", models.DateTimeField()),
                ("changes", models.JSONField(default=dict)),
                (
                    "quota",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="changes",
                        to="koordweb.elasticquota",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-changed_at", "-id"],
                "indexes": [
                    models.Index(fields=["quota", "-changed_at"], name="quota_change_when")
                ],
            },
        ),
    ]
