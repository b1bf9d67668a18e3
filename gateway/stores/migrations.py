"""The state database's schema: numbered migrations, the only place a table is created.

`PRAGMA user_version` holds the number of the last migration a database went through; opening
it runs the ones after that, in order, in one transaction with the version bump (so a crash or
a second process never sees half a migration), and refuses a database from a newer clawgate
(a version above the last one here) with one line, before changing anything.

Databases from before this mechanism (user_version 0) come in every shape clawgate ever wrote
(tests/gateway/stores/schemas/ has one per released schema). That is why every step is written
to be idempotent: `CREATE ... IF NOT EXISTS`, a column added only when missing, a trigger
dropped and created again. Run from 1 on such a database, the steps bring any of those
shapes to today's, and on a fresh file they build it. Numbered databases never run a step
twice.

To add a table: append one `Migration` at the end (never edit or reorder one that shipped),
and give it a store (docs/architecture.md, "State database").
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass


class SchemaTooNew(Exception):
    """The database was written by a newer clawgate; `str()` is the line to show."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One step: `apply` runs inside the migration's transaction (it must not commit)."""

    version: int
    what: str
    apply: Callable[[sqlite3.Connection], None]


def sql(*statements: str) -> Callable[[sqlite3.Connection], None]:
    """A step made of statements run in order (each one idempotent)."""

    def apply(db: sqlite3.Connection) -> None:
        for statement in statements:
            db.execute(statement)

    return apply


def add_column(table: str, column: str, definition: str) -> Callable[[sqlite3.Connection], None]:
    """A step adding a column unless it is there (a database created after the column was
    in the table's CREATE statement has it already)."""

    def apply(db: sqlite3.Connection) -> None:
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")

    return apply


def steps(*parts: Callable[[sqlite3.Connection], None]) -> Callable[[sqlite3.Connection], None]:
    def apply(db: sqlite3.Connection) -> None:
        for part in parts:
            part(db)

    return apply


# The outbox row that answers an inbox entry marks it done in the same statement: one atomic
# write, so a crash can repeat a send but never a turn. The body is kept only while the
# message may still be answered (`waiting`: the sender holds a pairing code).
_OUTBOX_MARKS_DONE = """
CREATE TRIGGER outbox_marks_done AFTER INSERT ON outbox
WHEN NEW.done_message IS NOT NULL BEGIN
    UPDATE inbox SET status = NEW.done_status, done_at = NEW.created_at,
        payload = CASE WHEN NEW.done_status = 'waiting' THEN payload
                  ELSE json_object('chat_type', json_extract(payload, '$.chat_type')) END
    WHERE channel = NEW.done_channel AND chat_id = NEW.done_chat
    AND message_id = NEW.done_message;
    DELETE FROM inbox_body WHERE channel = NEW.done_channel AND chat_id = NEW.done_chat
    AND message_id = NEW.done_message AND NEW.done_status != 'waiting';
END"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "inbox, offsets, access, pairing, links, last DM routes (2026-11-29)",
        sql(
            "CREATE TABLE IF NOT EXISTS inbox (channel TEXT NOT NULL, chat_id TEXT NOT NULL,"
            " message_id TEXT NOT NULL, payload TEXT NOT NULL,"
            " status TEXT NOT NULL DEFAULT 'pending', received_at TEXT NOT NULL, done_at TEXT,"
            " PRIMARY KEY (channel, chat_id, message_id))",
            "CREATE INDEX IF NOT EXISTS inbox_pending ON inbox (status, received_at)",
            "CREATE TABLE IF NOT EXISTS offsets (channel TEXT PRIMARY KEY, value INTEGER NOT NULL)",
            "CREATE TABLE IF NOT EXISTS approved (channel TEXT NOT NULL, sender_id TEXT NOT NULL,"
            " approved_at TEXT NOT NULL, via TEXT NOT NULL, PRIMARY KEY (channel, sender_id))",
            "CREATE TABLE IF NOT EXISTS pairing (channel TEXT NOT NULL, code TEXT NOT NULL,"
            " sender_id TEXT NOT NULL, chat_id TEXT NOT NULL, sender_name TEXT NOT NULL,"
            " created_at REAL NOT NULL, expires_at REAL NOT NULL,"
            " resent INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT 'pending',"
            " PRIMARY KEY (channel, code))",
            "CREATE INDEX IF NOT EXISTS pairing_sender ON pairing (channel, sender_id)",
            "CREATE TABLE IF NOT EXISTS approve_failures (channel TEXT NOT NULL, at REAL NOT NULL)",
            "CREATE TABLE IF NOT EXISTS links (channel TEXT NOT NULL, sender_id TEXT NOT NULL,"
            " person_id TEXT NOT NULL, linked_at TEXT NOT NULL, PRIMARY KEY (channel, sender_id))",
            "CREATE TABLE IF NOT EXISTS last_dm_route (person_id TEXT PRIMARY KEY,"
            " channel TEXT NOT NULL, chat_id TEXT NOT NULL, sender_id TEXT NOT NULL,"
            " at TEXT NOT NULL)",
        ),
    ),
    Migration(
        2,
        "message bodies apart from the inbox keys (2026-11-30)",
        sql(
            "CREATE TABLE IF NOT EXISTS inbox_body (channel TEXT NOT NULL, chat_id TEXT NOT NULL,"
            " message_id TEXT NOT NULL, payload TEXT NOT NULL,"
            " PRIMARY KEY (channel, chat_id, message_id))",
        ),
    ),
    Migration(
        3,
        "the outbox; the deliveries log it replaced goes (2026-11-30)",
        sql(
            "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " key TEXT UNIQUE, channel TEXT NOT NULL, chat_id TEXT NOT NULL, text TEXT NOT NULL,"
            " status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,"
            " error TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL, finished_at TEXT,"
            " done_channel TEXT, done_chat TEXT, done_message TEXT, done_status TEXT)",
            "CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (status, id)",
            "DROP TABLE IF EXISTS deliveries",
        ),
    ),
    # The trigger of 2026-11-30 (the outbox) dropped a waiting message's body; `CREATE
    # TRIGGER IF NOT EXISTS` never replaced it in the databases that had it.
    Migration(
        4,
        "welcomes; waiting messages keep their body (2026-11-30)",
        sql(
            "CREATE TABLE IF NOT EXISTS welcomes (channel TEXT NOT NULL, sender_id TEXT NOT NULL,"
            " chat_id TEXT NOT NULL, person_id TEXT NOT NULL, as_owner INTEGER NOT NULL,"
            " approved_at TEXT NOT NULL, done_at TEXT, PRIMARY KEY (channel, sender_id))",
            "DROP TRIGGER IF EXISTS outbox_marks_done",
            _OUTBOX_MARKS_DONE,
        ),
    ),
    Migration(
        5,
        "retries of a resumed message, outbox parts sent (2026-12-01)",
        steps(
            add_column("inbox", "retries", "INTEGER NOT NULL DEFAULT 0"),
            add_column("outbox", "parts_sent", "INTEGER NOT NULL DEFAULT 0"),
        ),
    ),
    Migration(
        6,
        "the usage ledger (2026-12-01)",
        sql(
            "CREATE TABLE IF NOT EXISTS usage_daily (person TEXT NOT NULL, day TEXT NOT NULL,"
            " kind TEXT NOT NULL, model TEXT NOT NULL, calls INTEGER NOT NULL DEFAULT 0,"
            " input INTEGER NOT NULL DEFAULT 0, output INTEGER NOT NULL DEFAULT 0,"
            " cache_read INTEGER NOT NULL DEFAULT 0, cache_write INTEGER NOT NULL DEFAULT 0,"
            " cost REAL NOT NULL DEFAULT 0, PRIMARY KEY (person, day, kind, model))",
        ),
    ),
    Migration(
        7,
        "live previews (2026-12-01)",
        steps(
            sql(
                "CREATE TABLE IF NOT EXISTS previews (key TEXT PRIMARY KEY, channel TEXT NOT NULL,"
                " chat_id TEXT NOT NULL, message_id TEXT NOT NULL, at TEXT NOT NULL)",
            ),
            add_column("outbox", "replaces", "TEXT NOT NULL DEFAULT ''"),
        ),
    ),
    Migration(
        8,
        "files sent through the outbox (2026-12-01)",
        add_column("outbox", "file", "TEXT NOT NULL DEFAULT ''"),
    ),
    Migration(
        9,
        "group chats' daily usage (2026-12-02)",
        sql(
            "CREATE TABLE IF NOT EXISTS usage_groups_daily (chat TEXT NOT NULL, day TEXT NOT NULL,"
            " calls INTEGER NOT NULL DEFAULT 0, input INTEGER NOT NULL DEFAULT 0,"
            " output INTEGER NOT NULL DEFAULT 0, cache_read INTEGER NOT NULL DEFAULT 0,"
            " cache_write INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0,"
            " PRIMARY KEY (chat, day))",
        ),
    ),
    Migration(
        10,
        "exec approvals, always-allowed commands and runs (2026-12-06)",
        sql(
            "CREATE TABLE IF NOT EXISTS exec_approvals ("
            " code TEXT PRIMARY KEY, person_id TEXT NOT NULL, workspace TEXT NOT NULL,"
            " session_key TEXT NOT NULL, channel TEXT NOT NULL, chat_id TEXT NOT NULL,"
            " command TEXT NOT NULL, cwd TEXT NOT NULL, network INTEGER NOT NULL,"
            " timeout REAL, digest TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',"
            " always INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL,"
            " expires_at REAL NOT NULL,"
            " decided_by TEXT NOT NULL DEFAULT '', decided_at REAL,"
            " request_channel TEXT NOT NULL DEFAULT '', request_chat TEXT NOT NULL DEFAULT '',"
            " request_message TEXT NOT NULL DEFAULT '', message_id TEXT NOT NULL DEFAULT '')",
            "CREATE INDEX IF NOT EXISTS exec_approvals_status"
            " ON exec_approvals (status, expires_at)",
            "CREATE TABLE IF NOT EXISTS exec_always ("
            " person_id TEXT NOT NULL, digest TEXT NOT NULL, command TEXT NOT NULL,"
            " cwd TEXT NOT NULL, network INTEGER NOT NULL, added_by TEXT NOT NULL,"
            " added_at REAL NOT NULL, PRIMARY KEY (person_id, digest))",
            "CREATE TABLE IF NOT EXISTS exec_runs ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT, person_id TEXT NOT NULL, command TEXT NOT NULL,"
            " cwd TEXT NOT NULL, network INTEGER NOT NULL, approved_by TEXT NOT NULL,"
            " code TEXT NOT NULL DEFAULT '', exit_code INTEGER, ended TEXT NOT NULL,"
            " duration REAL NOT NULL, bytes_out INTEGER NOT NULL, at REAL NOT NULL)",
            "CREATE INDEX IF NOT EXISTS exec_runs_person ON exec_runs (person_id, at)",
        ),
    ),
    Migration(
        11,
        "background tasks (2026-12-06)",
        sql(
            "CREATE TABLE IF NOT EXISTS tasks ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT, person TEXT NOT NULL,"
            " number INTEGER NOT NULL, workspace TEXT NOT NULL, channel TEXT NOT NULL,"
            " chat_id TEXT NOT NULL, session_key TEXT NOT NULL, private INTEGER NOT NULL,"
            " sender_id TEXT NOT NULL DEFAULT '', goal TEXT NOT NULL,"
            " context TEXT NOT NULL DEFAULT '', tools TEXT NOT NULL DEFAULT '[]',"
            " model TEXT NOT NULL DEFAULT '', token_cap INTEGER NOT NULL,"
            " deadline REAL NOT NULL, state TEXT NOT NULL DEFAULT 'queued',"
            " tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0,"
            " steps INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, started_at REAL,"
            " finished_at REAL, cancel_requested INTEGER NOT NULL DEFAULT 0,"
            " cancelled_by TEXT NOT NULL DEFAULT '', result TEXT NOT NULL DEFAULT '',"
            " error TEXT NOT NULL DEFAULT '', reported INTEGER NOT NULL DEFAULT 0,"
            " reported_at REAL, noted INTEGER NOT NULL DEFAULT 0,"
            " outside TEXT NOT NULL DEFAULT '', UNIQUE (person, number))",
            "CREATE INDEX IF NOT EXISTS tasks_state ON tasks (state, id)",
        ),
    ),
    # Next: Migration(12, "...", sql("CREATE TABLE IF NOT EXISTS ...")), and a store for it.
)

LATEST = MIGRATIONS[-1].version


def too_new(version: int, latest: int = LATEST) -> str:
    return (
        f"the state database is at schema version {version}, written by a newer clawgate "
        f"(this one knows up to {latest}); upgrade clawgate, or restore a backup made "
        f"with this version (clawgate restore ARCHIVE --force)"
    )


def version_of(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Run the migrations `db` has not been through; returns the version it is at now.

    Called inside a transaction (the writer's, gateway/stores/database.py): the steps and the
    new `user_version` commit together or not at all.
    """
    latest = migrations[-1].version
    current = version_of(db)
    if current > latest:
        raise SchemaTooNew(too_new(current, latest))
    for migration in migrations:
        if migration.version > current:
            migration.apply(db)
    if current != latest:
        db.execute(f"PRAGMA user_version={latest}")
    return latest


def check_numbering(migrations: tuple[Migration, ...] = MIGRATIONS) -> None:
    """The versions run 1, 2, 3, ... with no gap (tests/gateway/stores/test_migrations.py)."""
    numbers = [m.version for m in migrations]
    if numbers != list(range(1, len(numbers) + 1)):
        raise AssertionError(f"migrations are not numbered 1..{len(numbers)}: {numbers}")
