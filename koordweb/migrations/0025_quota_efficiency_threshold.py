"""The quota's GPU efficiency threshold: a job that used less than this percent of the GPU time
it held over the efficiency page's window is flagged as underused (issue 37)."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("koordweb", "0024_round_number"),
    ]

    operations = [
        migrations.AddField(
            model_name="elasticquota",
            name="gpu_efficiency_threshold_percent",
            field=models.PositiveSmallIntegerField(
                default=50,
                help_text="Flag a job that used less than this percent of the GPU time it held.",
                validators=[django.core.validators.MaxValueValidator(100)],
            ),
        ),
    ]
