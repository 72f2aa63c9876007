"""Pods and intents lose the single-column indexes of their cluster (and a pod of its node):
composite indexes lead with those columns, and every write of a pod (thousands a round) updates
each index. The indexes are dropped in place: altering the fields would make SQLite rebuild the
pod table and lose the change-position triggers of migration 0008."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

DROPPED = (("pod", "cluster_id"), ("pod", "node_id"), ("intent", "cluster_id"))


def _single_column_indexes(schema_editor: Any, model: Any, column: str) -> list[str]:
    return schema_editor._constraint_names(
        model, [column], index=True, unique=False, primary_key=False
    )


def drop_indexes(apps: Any, schema_editor: Any) -> None:
    for name, column in DROPPED:
        model = apps.get_model("koordweb", name)
        for index in _single_column_indexes(schema_editor, model, column):
            schema_editor.execute(schema_editor._delete_index_sql(model, index))


def create_indexes(apps: Any, schema_editor: Any) -> None:
    for name, column in DROPPED:
        model = apps.get_model("koordweb", name)
        if not _single_column_indexes(schema_editor, model, column):
            field = model._meta.get_field(column.removesuffix("_id"))
            schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


class Migration(migrations.Migration):
    dependencies = [("koordweb", "0009_cluster_lease")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_indexes, create_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name="intent",
                    name="cluster",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="intents",
                        to="koordweb.cluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="pod",
                    name="cluster",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="pods",
                        to="koordweb.cluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="pod",
                    name="node",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="pods",
                        to="koordweb.node",
                    ),
                ),
            ],
        )
    ]
