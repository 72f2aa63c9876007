"""PostgreSQL: the change position (migration 0008) costs a PL/pgSQL call only when the writer
did not set it. A new row takes the writing transaction's id as its column default; an update runs
the trigger only when the row's position is not already the writing transaction's id, so the
round's bulk writes, which set it themselves (`koordweb.rows.changes`), skip the call, and so
does a second write of a row in one transaction. That call was about a fifth of binding
5,000 pods. Any other write (the ORM never names the column) still gets its position from the
trigger, as before. SQLite keeps its triggers of migration 0008 as they are."""

from django.db import migrations

from koordweb.migrations._postgres import on_postgresql

TABLES = ("koordweb_node", "koordweb_pod", "koordweb_job", "koordweb_nodemetric", "koordweb_device")
POSITION = "pg_current_xact_id()::text::bigint"

FORWARD = []
BACKWARD = []
for table in TABLES:
    FORWARD += [
        f"DROP TRIGGER {table}_change ON {table}",
        f"ALTER TABLE {table} ALTER COLUMN change_seq SET DEFAULT ({POSITION})",
        f"""CREATE TRIGGER {table}_change BEFORE UPDATE ON {table} FOR EACH ROW
        WHEN (NEW.change_seq < {POSITION}) EXECUTE FUNCTION koordweb_change_seq()""",
    ]
    BACKWARD += [
        f"DROP TRIGGER {table}_change ON {table}",
        f"ALTER TABLE {table} ALTER COLUMN change_seq SET DEFAULT 0",
        f"""CREATE TRIGGER {table}_change BEFORE INSERT OR UPDATE ON {table}
        FOR EACH ROW EXECUTE FUNCTION koordweb_change_seq()""",
    ]


class Migration(migrations.Migration):
    dependencies = [("koordweb", "0016_pod_nominated_node_partial_index")]

    operations = [migrations.RunPython(on_postgresql(FORWARD), on_postgresql(BACKWARD))]
