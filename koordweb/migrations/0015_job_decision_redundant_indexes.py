"""Single-column indexes that a composite index already leads with go: a job's cluster (led by
(cluster, state), (cluster, submitted_at) and the unique name), a job's quota (led by (quota,
state)) and a decision's job (led by (job, -created_at)). Every job state change and every
decision wrote one entry more for nothing. Dropped in place, as in migrations 0010 and 0014:
altering the fields would make SQLite rebuild the job table and lose its change-position
triggers (migration 0008)."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

# (model, field, column) whose single-column index goes.
REDUNDANT = (
    ("job", "cluster", "cluster_id"),
    ("job", "quota", "quota_id"),
    ("decision", "job", "job_id"),
)


def _indexes(schema_editor: Any, model: Any, column: str) -> list[str]:
    return schema_editor._constraint_names(
        model, [column], index=True, unique=False, primary_key=False
    )


def drop_indexes(apps: Any, schema_editor: Any) -> None:
    for model_name, _field, column in REDUNDANT:
        model = apps.get_model("koordweb", model_name)
        for index in _indexes(schema_editor, model, column):
            schema_editor.execute(schema_editor._delete_index_sql(model, index))


def create_indexes(apps: Any, schema_editor: Any) -> None:
    for model_name, field, column in REDUNDANT:
        model = apps.get_model("koordweb", model_name)
        if not _indexes(schema_editor, model, column):
            target = model._meta.get_field(field)
            schema_editor.execute(schema_editor._create_index_sql(model, fields=[target]))


class Migration(migrations.Migration):
    dependencies = [("koordweb", "0014_pod_nominated_node_unindexed")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_indexes, create_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name="job",
                    name="cluster",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="jobs",
                        to="koordweb.cluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="quota",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.RESTRICT,
                        related_name="jobs",
                        to="koordweb.elasticquota",
                    ),
                ),
                migrations.AlterField(
                    model_name="decision",
                    name="job",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="decisions",
                        to="koordweb.job",
                    ),
                ),
            ],
        )
    ]
