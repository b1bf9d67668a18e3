"""Write one SQL file per state database schema clawgate ever shipped, from the git history.

Each released schema is what a fresh install at that commit of main created: the `_SCHEMA`
strings of the state and usage modules run in the order the code ran them at open, then the
columns it added to existing tables. The files hold that schema (as sqlite_master keeps it) and
a few rows; tests/gateway/stores/test_migrations.py builds a database from each, migrates it and
checks that the rows survive and the schema equals a fresh one. Run from the repository root,
once per schema change before numbered migrations existed (never again since):

    python tests/gateway/stores/schemas/from_history.py
"""

from __future__ import annotations

import ast
import contextlib
import sqlite3
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
# (file name, commit on main's first-parent history where the schema first shipped)
VERSIONS = (
    ("v1-telegram", "3a0528c"),
    ("v2-inbox-bodies", "61c9692"),
    ("v3-outbox", "2740a33"),
    ("v4-welcomes", "22e7c2a"),
    ("v5-crash-recovery", "800fefc"),
    ("v6-usage", "b50476c"),
    ("v7-previews", "671c298"),
    ("v8-outbox-files", "650f31f"),
    ("v9-group-usage", "1c3372f"),
)
MODULES = ("gateway/state.py", "gateway/ops/state.py", "gateway/ops/usage.py")

T = "'2026-11-29T10:00:00+00:00'"
MESSAGE = (
    '{"channel": "telegram", "chat_id": "42", "sender_id": "55", "text": "still there?",'
    ' "chat_type": "direct", "message_id": "7", "sender_name": "Ana",'
    ' "received_at": "2026-11-29T10:00:00+00:00"}'
)
# A few rows per table, in the columns every version of the table has.
ROWS = {
    "inbox": [
        f"INSERT INTO inbox (channel, chat_id, message_id, payload, status, received_at)"
        f" VALUES ('telegram', '42', '7', '{MESSAGE}', 'pending', {T})",
        f"INSERT INTO inbox (channel, chat_id, message_id, payload, status, received_at,"
        f" done_at) VALUES ('telegram', '42', '6', '{{\"chat_type\": \"direct\"}}', 'done',"
        f" {T}, {T})",
    ],
    "inbox_body": [f"INSERT INTO inbox_body VALUES ('telegram', '42', '7', '{MESSAGE}')"],
    "offsets": ["INSERT INTO offsets VALUES ('telegram', 1001)"],
    "approved": [f"INSERT INTO approved VALUES ('telegram', '55', {T}, 'pairing:ABCD2345')"],
    "pairing": [
        "INSERT INTO pairing (channel, code, sender_id, chat_id, sender_name,"
        " created_at, expires_at) VALUES ('telegram', 'WXYZ2345', '66', '66', 'Ben',"
        " 1796000000.0, 1796003600.0)"
    ],
    "approve_failures": ["INSERT INTO approve_failures VALUES ('telegram', 1796000000.0)"],
    "links": [f"INSERT INTO links VALUES ('discord', '77', 'ana', {T})"],
    "last_dm_route": [f"INSERT INTO last_dm_route VALUES ('ana', 'telegram', '42', '55', {T})"],
    "deliveries": [
        f"INSERT INTO deliveries (channel, chat_id, ok, at) VALUES ('telegram', '42', 1, {T})"
    ],
    "outbox": [
        f"INSERT INTO outbox (key, channel, chat_id, text, created_at) VALUES"
        f" ('reply:telegram:42:7', 'telegram', '42', 'yes, here', {T})"
    ],
    "welcomes": [
        f"INSERT INTO welcomes (channel, sender_id, chat_id, person_id, as_owner,"
        f" approved_at) VALUES ('telegram', '66', '66', 'telegram-66', 0, {T})"
    ],
    "usage_daily": [
        "INSERT INTO usage_daily VALUES ('ana', '2026-11-29', 'turn', 'm', 3, 300, 30, 0, 0, 0.25)"
    ],
    "previews": [
        f"INSERT INTO previews VALUES ('reply:telegram:42:7', 'telegram', '42', '900', {T})"
    ],
    "usage_groups_daily": [
        "INSERT INTO usage_groups_daily VALUES"
        " ('telegram:group:-5', '2026-11-29', 1, 100, 10, 0, 0, 0.1)"
    ],
}


def _constants(source: str) -> dict[str, object]:
    found: dict[str, object] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            with contextlib.suppress(ValueError):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def schema_at(commit: str) -> list[str]:
    db = sqlite3.connect(":memory:")
    for module in MODULES:
        shown = subprocess.run(
            ["git", "show", f"{commit}:{module}"], capture_output=True, text=True
        )
        if shown.returncode:
            continue
        constants = _constants(shown.stdout)
        for name in ("_SCHEMA", "_GROUP_SCHEMA"):
            if isinstance(constants.get(name), str):
                db.executescript(str(constants[name]))
        for table, column, definition in constants.get("_ADDED_COLUMNS", ()):  # type: ignore[attr-defined]
            present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
    return [
        str(sql)
        for (sql,) in db.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name != 'sqlite_sequence'"
            " ORDER BY rowid"
        )
    ]


def main() -> None:
    for name, commit in VERSIONS:
        statements = schema_at(commit)
        tables = [s.split()[2] for s in statements if s.startswith("CREATE TABLE")]
        lines = [
            f"-- The state database as a fresh install at {commit} created it, with a few rows.",
            "-- Written by tests/gateway/stores/schemas/from_history.py; do not edit.",
        ]
        lines += [s.strip() + ";" for s in statements]
        lines += [row + ";" for table in tables for row in ROWS[table]]
        (HERE / f"{name}.sql").write_text("\n".join(lines) + "\n")
        print(name, len(tables), "tables")


if __name__ == "__main__":
    main()
