"""A change position on the rows a snapshot reads, kept by the database itself (triggers), and a
record of deleted rows: the warm snapshot (koordweb.services.warm) reads only what changed.

Not model fields: no Django write ever names them, so a stale model instance saved whole cannot
move a row's position back. PostgreSQL: the writing transaction's id (a round reads "changed at or
after the oldest transaction still running at my last read", so a transaction that commits late is
never missed). SQLite (one writer at a time): a counter bumped by each write.
"""

from django.db import migrations

TABLES = ("koordweb_node", "koordweb_pod", "koordweb_job", "koordweb_nodemetric", "koordweb_device")

POSTGRES = [
    """CREATE OR REPLACE FUNCTION koordweb_change_seq() RETURNS trigger AS $$
    BEGIN NEW.change_seq := pg_current_xact_id()::text::bigint; RETURN NEW; END
    $$ LANGUAGE plpgsql""",
    """CREATE OR REPLACE FUNCTION koordweb_row_deleted() RETURNS trigger AS $$
    BEGIN
      INSERT INTO koordweb_deleted_row (table_name, row_id, change_seq, deleted_epoch)
      VALUES (TG_TABLE_NAME, OLD.id, pg_current_xact_id()::text::bigint,
              extract(epoch from now())::bigint);
      RETURN OLD;
    END
    $$ LANGUAGE plpgsql""",
    """CREATE TABLE koordweb_deleted_row (table_name varchar(64) NOT NULL, row_id bigint NOT NULL,
    change_seq bigint NOT NULL, deleted_epoch bigint NOT NULL)""",
    "CREATE INDEX koordweb_deleted_row_seq ON koordweb_deleted_row (change_seq)",
]
for table in TABLES:
    POSTGRES += [
        f"ALTER TABLE {table} ADD COLUMN change_seq bigint NOT NULL DEFAULT 0",
        f"CREATE INDEX {table}_change_seq ON {table} (change_seq)",
        f"""CREATE TRIGGER {table}_change BEFORE INSERT OR UPDATE ON {table}
        FOR EACH ROW EXECUTE FUNCTION koordweb_change_seq()""",
        f"""CREATE TRIGGER {table}_deleted AFTER DELETE ON {table}
        FOR EACH ROW EXECUTE FUNCTION koordweb_row_deleted()""",
    ]

SQLITE = [
    "CREATE TABLE koordweb_change_counter (id integer PRIMARY KEY, value integer NOT NULL)",
    "INSERT INTO koordweb_change_counter (id, value) VALUES (1, 0)",
    """CREATE TABLE koordweb_deleted_row (table_name varchar(64) NOT NULL, row_id bigint NOT NULL,
    change_seq bigint NOT NULL, deleted_epoch bigint NOT NULL)""",
    "CREATE INDEX koordweb_deleted_row_seq ON koordweb_deleted_row (change_seq)",
]
BUMP = "UPDATE koordweb_change_counter SET value = value + 1 WHERE id = 1;"
CURRENT = "(SELECT value FROM koordweb_change_counter WHERE id = 1)"
for table in TABLES:
    SQLITE += [
        f"ALTER TABLE {table} ADD COLUMN change_seq bigint NOT NULL DEFAULT 0",
        f"CREATE INDEX {table}_change_seq ON {table} (change_seq)",
        f"""CREATE TRIGGER {table}_inserted AFTER INSERT ON {table} BEGIN {BUMP}
        UPDATE {table} SET change_seq = {CURRENT} WHERE id = NEW.id; END""",
        # The trigger's own update moves the position forward, so it does not fire again.
        f"""CREATE TRIGGER {table}_updated AFTER UPDATE ON {table}
        WHEN NEW.change_seq <= OLD.change_seq BEGIN {BUMP}
        UPDATE {table} SET change_seq = {CURRENT} WHERE id = NEW.id; END""",
        f"""CREATE TRIGGER {table}_deleted AFTER DELETE ON {table} BEGIN {BUMP}
        INSERT INTO koordweb_deleted_row (table_name, row_id, change_seq, deleted_epoch)
        VALUES ('{table}', OLD.id, {CURRENT}, CAST(strftime('%s', 'now') AS integer)); END""",
    ]


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    statements = POSTGRES if vendor == "postgresql" else SQLITE if vendor == "sqlite" else []
    for sql in statements:
        schema_editor.execute(sql, params=None)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor not in ("postgresql", "sqlite"):
        return
    for table in TABLES:
        for suffix in ("change", "inserted", "updated", "deleted"):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_{suffix}"
                                  + (f" ON {table}" if vendor == "postgresql" else ""), params=None)
        schema_editor.execute(f"DROP INDEX IF EXISTS {table}_change_seq", params=None)
        schema_editor.execute(f"ALTER TABLE {table} DROP COLUMN change_seq", params=None)
    schema_editor.execute("DROP TABLE IF EXISTS koordweb_deleted_row", params=None)
    if vendor == "sqlite":
        schema_editor.execute("DROP TABLE IF EXISTS koordweb_change_counter", params=None)
    else:
        schema_editor.execute("DROP FUNCTION IF EXISTS koordweb_change_seq()", params=None)
        schema_editor.execute("DROP FUNCTION IF EXISTS koordweb_row_deleted()", params=None)


class Migration(migrations.Migration):
    dependencies = [("koordweb", "0007_gpu_usage_history")]

    operations = [migrations.RunPython(forward, backward)]
