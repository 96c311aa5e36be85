"""Whose each entry of the disk index is: a `tenant` column, and each tenant's bytes in a table
that triggers keep, read after each commit.

An index of an earlier version gains the column at start (SQLite adds it without rewriting the
rows); its entries belong to tenant "" until a tenant's load fetches them again.
"""

from __future__ import annotations

import sqlite3

ADD_COLUMN = "ALTER TABLE artifacts ADD COLUMN tenant TEXT NOT NULL DEFAULT ''"
TENANT_TOTALS = """
CREATE TABLE tenant_totals (tenant TEXT PRIMARY KEY, entry_bytes INTEGER NOT NULL);
INSERT INTO tenant_totals
    SELECT tenant, SUM(bytes) FROM artifacts WHERE entry IS NOT NULL GROUP BY tenant;
"""
TENANT_SCHEMA = """
CREATE INDEX IF NOT EXISTS entries_by_tenant ON artifacts (tenant, last_used)
    WHERE entry IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS tenant_insert AFTER INSERT ON artifacts
WHEN NEW.entry IS NOT NULL BEGIN
    INSERT INTO tenant_totals VALUES (NEW.tenant, NEW.bytes)
        ON CONFLICT (tenant) DO UPDATE SET entry_bytes = entry_bytes + excluded.entry_bytes;
END;
CREATE TRIGGER IF NOT EXISTS tenant_delete AFTER DELETE ON artifacts
WHEN OLD.entry IS NOT NULL BEGIN
    UPDATE tenant_totals SET entry_bytes = entry_bytes - OLD.bytes WHERE tenant = OLD.tenant;
    DELETE FROM tenant_totals WHERE tenant = OLD.tenant AND entry_bytes = 0;
END;
CREATE TRIGGER IF NOT EXISTS tenant_update AFTER UPDATE OF entry, bytes, tenant ON artifacts BEGIN
    UPDATE tenant_totals SET entry_bytes = entry_bytes - OLD.bytes
        WHERE OLD.entry IS NOT NULL AND tenant = OLD.tenant;
    INSERT INTO tenant_totals SELECT NEW.tenant, NEW.bytes WHERE NEW.entry IS NOT NULL
        ON CONFLICT (tenant) DO UPDATE SET entry_bytes = entry_bytes + excluded.entry_bytes;
    DELETE FROM tenant_totals WHERE tenant = OLD.tenant AND entry_bytes = 0;
END;
"""
OLDEST_OF_TENANT = (
    "SELECT {columns} FROM artifacts WHERE tenant = ? AND entry IS NOT NULL ORDER BY last_used"
)
TENANTS_HELD = "SELECT tenant, entry_bytes FROM tenant_totals"


def migrate(connection: sqlite3.Connection) -> None:
    """The tenant column, its index, totals and triggers, on an index of any version."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(artifacts)")}
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    if "tenant" not in columns:
        connection.execute(ADD_COLUMN)
    if "tenant_totals" not in tables:
        connection.executescript(f"BEGIN; {TENANT_TOTALS} COMMIT;")
    connection.executescript(TENANT_SCHEMA)
