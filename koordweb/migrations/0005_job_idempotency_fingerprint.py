"""Job.idempotency_fingerprint: a digest of the body that first used an Idempotency-Key."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("koordweb", "0004_outbox_and_graceful_preemption"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="idempotency_fingerprint",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
