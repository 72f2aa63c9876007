"""A pod's nominated node loses its single-column index: nothing looks pods up by it but a node's
deletion, and every bind writes the column (one index entry fewer per bound pod). Dropped in
place, as in migration 0010: altering the field would make SQLite rebuild the pod table and lose
the change-position triggers of migration 0008."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models


def _indexes(schema_editor: Any, model: Any) -> list[str]:
    return schema_editor._constraint_names(
        model, ["nominated_node_id"], index=True, unique=False, primary_key=False
    )


def drop_index(apps: Any, schema_editor: Any) -> None:
    model = apps.get_model("koordweb", "pod")
    for index in _indexes(schema_editor, model):
        schema_editor.execute(schema_editor._delete_index_sql(model, index))


def create_index(apps: Any, schema_editor: Any) -> None:
    model = apps.get_model("koordweb", "pod")
    if not _indexes(schema_editor, model):
        field = model._meta.get_field("nominated_node")
        schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


class Migration(migrations.Migration):
    dependencies = [("koordweb", "0013_intent_outbox_without_constraints")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_index, create_index)],
            state_operations=[
                migrations.AlterField(
                    model_name="pod",
                    name="nominated_node",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="nominated_pods",
                        to="koordweb.node",
                    ),
                ),
            ],
        )
    ]
