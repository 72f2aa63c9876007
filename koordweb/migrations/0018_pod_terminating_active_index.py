"""The pods still terminating are indexed by cluster, and only they: every round's sync looks for
them among every pod the cluster ever ran, and without an index that read (and the write after
it) scanned the whole history, 50-120 ms each at 112,000 pods. Few pods terminate at a time, so
the index stays small and a bind, which never touches a terminating pod, adds no entry. A plain
CREATE INDEX on both databases: SQLite keeps the pod table and its change-position triggers."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("koordweb", "0017_change_position_set_by_writers")]

    operations = [
        migrations.AddIndex(
            model_name="pod",
            index=models.Index(
                condition=models.Q(
                    ("terminating", True),
                    models.Q(("phase__in", ["Succeeded", "Failed"]), _negated=True),
                ),
                fields=["cluster"],
                name="pod_terminating_active",
            ),
        ),
    ]
