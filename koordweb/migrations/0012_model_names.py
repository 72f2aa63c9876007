"""The admin's names: priority classes are "priority classes", not "priority classs".

Depends on 0010 on its branch; 0011 is written in parallel and re-chained at the merge."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("koordweb", "0011_preemption_rule_data"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="priorityclass",
            options={
                "ordering": ["cluster", "-value", "name"],
                "verbose_name_plural": "priority classes",
            },
        ),
    ]
