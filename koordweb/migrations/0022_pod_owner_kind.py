"""The kind of a pod's owner (Pod.owner_kind, from metadata.ownerReferences): a DaemonSet's pods
pass LoadAware's Filter, as in Koordinator. The column is added in place with plain SQL: adding a
field through the schema editor makes SQLite rebuild the pod table and lose the change-position
column and triggers of migration 0008 (as migrations 0010 and 0014 note)."""

from typing import Any

from django.db import migrations, models


def add_column(apps: Any, schema_editor: Any) -> None:
    table = schema_editor.quote_name("koordweb_pod")
    schema_editor.execute(
        f"ALTER TABLE {table} ADD COLUMN owner_kind varchar(63) NOT NULL DEFAULT ''"
    )


def drop_column(apps: Any, schema_editor: Any) -> None:
    table = schema_editor.quote_name("koordweb_pod")
    schema_editor.execute(f"ALTER TABLE {table} DROP COLUMN owner_kind")


class Migration(migrations.Migration):
    dependencies = [("koordweb", "0021_preemption_outcome")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(add_column, drop_column)],
            state_operations=[
                migrations.AddField(
                    model_name="pod",
                    name="owner_kind",
                    field=models.CharField(blank=True, max_length=63),
                ),
            ],
        )
    ]
