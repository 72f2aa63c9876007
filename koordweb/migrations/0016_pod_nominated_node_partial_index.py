"""A pod's nominated node is indexed again, only where it is set. Without an index, deleting a node
scanned the whole pod table (the database's check of the nominated-node reference): a cluster of
5,000 nodes and 7,500 pods took 11 s to delete. A bind clears the column, so the bound pod adds no
entry, which is what migration 0014 wanted to spare. A plain CREATE INDEX on both databases:
SQLite keeps the pod table and its change-position triggers."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("koordweb", "0015_job_decision_redundant_indexes")]

    operations = [
        migrations.AddIndex(
            model_name="pod",
            index=models.Index(
                condition=models.Q(("nominated_node__isnull", False)),
                fields=["nominated_node"],
                name="pod_nominated_node_set",
            ),
        ),
    ]
