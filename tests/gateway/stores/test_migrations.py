"""Migrations: every schema clawgate ever shipped comes up to today's, rows intact; a database
from a newer clawgate is refused in one line, untouched."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from gateway.stores.database import StateDatabase, StateError
from gateway.stores.migrations import LATEST, MIGRATIONS, SchemaTooNew, check_numbering, migrate
from gateway.stores.state import StateDB

SCHEMAS = sorted((Path(__file__).parent / "schemas").glob("v*.sql"))


def describe(path: Path) -> dict[str, object]:
    """A database's schema, as the code sees it: each table's columns (in any order: every
    statement names them), indexes and triggers."""
    db = sqlite3.connect(path)
    try:
        shape: dict[str, object] = {}
        for kind, name, table, sql in db.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
        ):
            if kind == "table":
                shape[name] = sorted(tuple(r[1:]) for r in db.execute(f"PRAGMA table_info({name})"))
            elif kind == "index":
                unique = [r[2] for r in db.execute(f"PRAGMA index_list({table})") if r[1] == name]
                columns = [r[2] for r in db.execute(f"PRAGMA index_info({name})")]
                shape[name] = (table, unique, columns)
            else:
                shape[name] = " ".join(str(sql).split())
        return shape
    finally:
        db.close()


def counts(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'sqlite_sequence'"
            )
        ]
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        db.close()


def user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def build(path: Path, script: str) -> None:
    db = sqlite3.connect(path)
    try:
        db.executescript(script)
    finally:
        db.close()


@pytest.fixture
async def fresh(tmp_path: Path) -> dict[str, object]:
    path = tmp_path / "fresh" / "state.db"
    database = StateDatabase(path)
    await database.open()
    await database.close()
    return describe(path)


def test_the_migrations_are_numbered_without_gaps() -> None:
    check_numbering()
    assert len(MIGRATIONS) == LATEST
    with pytest.raises(AssertionError):
        check_numbering((*MIGRATIONS[:2], MIGRATIONS[3]))


def test_every_released_schema_is_here() -> None:
    assert [p.stem.split("-")[0] for p in SCHEMAS] == [f"v{n}" for n in range(1, 10)]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[p.stem for p in SCHEMAS])
async def test_each_released_schema_migrates_to_a_fresh_one_keeping_its_rows(
    schema: Path, tmp_path: Path, fresh: dict[str, object]
) -> None:
    path = tmp_path / "state.db"
    build(path, schema.read_text())
    before = counts(path)
    assert describe(path) != fresh  # else this version proves nothing
    database = StateDatabase(path)
    await database.open()
    await database.close()
    assert describe(path) == fresh
    assert user_version(path) == LATEST
    after = counts(path)
    before.pop("deliveries", None)  # the log the outbox replaced: dropped by migration 3
    assert {t: after[t] for t in before} == before
    assert all(n == 0 for t, n in after.items() if t not in before)


@pytest.mark.parametrize("schema", SCHEMAS, ids=[p.stem for p in SCHEMAS])
async def test_the_stores_read_a_migrated_database(schema: Path, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build(path, schema.read_text())
    async with StateDB(path) as state:
        [pending] = await state.inbox.pending_inbound()
        assert (pending.chat_id, pending.text, pending.sender_name) == ("42", "still there?", "Ana")
        assert await state.access.is_approved("telegram", "55")
        assert await state.links.person_for("discord", "77") == "ana"
        route = await state.links.last_dm_route("ana")
        assert route is not None and route.chat_id == "42"
        assert await state.offsets.load_offset("telegram") == 1001
        outgoing = await state.outbox.pending_outbound()
        has_outbox = "CREATE TABLE outbox" in schema.read_text()
        assert [m.text for m in outgoing] == (["yes, here"] if has_outbox else [])
        # New rows in every column the migrations added.
        assert await state.inbox.note_retry(pending) == 1
        row = await state.outbox.enqueue_outbound(
            "telegram", "42", "a file", file="/x.pdf", replaces="900", done=pending
        )
        assert row is not None
        await state.outbox.note_parts(row, 1)
        assert await state.inbox.pending_inbound() == []


async def test_a_waiting_message_keeps_its_body_after_the_outbox_trigger_is_replaced(
    tmp_path: Path,
) -> None:
    """The outbox trigger of 2026-11-30 dropped the body of a message answered as `waiting`
    (a stranger with a pairing code); `CREATE TRIGGER IF NOT EXISTS` never replaced it."""
    path = tmp_path / "state.db"
    build(path, (Path(__file__).parent / "schemas" / "v3-outbox.sql").read_text())
    async with StateDB(path) as state:
        [msg] = await state.inbox.pending_inbound()
        await state.outbox.enqueue_outbound(
            "telegram", "42", "your code is ...", done=msg, done_status="waiting"
        )
        assert [m.text for m in await state.inbox.waiting_inbound("telegram", "55")] == [
            "still there?"
        ]


@pytest.mark.parametrize("version", range(LATEST + 1))
async def test_a_numbered_database_runs_only_the_migrations_after_its_version(
    version: int, tmp_path: Path, fresh: dict[str, object]
) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    migrate(db, MIGRATIONS[:version]) if version else None
    db.execute("COMMIT")
    db.close()
    assert user_version(path) == version
    database = StateDatabase(path)
    await database.open()
    await database.close()
    assert describe(path) == fresh and user_version(path) == LATEST


async def test_a_database_from_a_newer_clawgate_is_refused_in_one_line_and_left_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    build(path, f"CREATE TABLE future (x); PRAGMA user_version = {LATEST + 1};")
    before = describe(path)
    with pytest.raises(StateError) as refused:
        await StateDB(path).open()
    message = str(refused.value)
    assert "\n" not in message
    assert f"schema version {LATEST + 1}" in message and "newer clawgate" in message
    assert describe(path) == before and user_version(path) == LATEST + 1


def test_a_step_failing_leaves_the_version_and_schema_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY)")  # no `status`: step 3's index fails
    db.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError):
        migrate(db)
    db.execute("ROLLBACK")
    db.close()
    assert user_version(path) == 0
    assert list(describe(path)) == ["outbox"]


def test_migrate_itself_refuses_a_newer_version(tmp_path: Path) -> None:
    """The check inside the writer's transaction (another clawgate may have migrated the file
    between the reader's look and the writer's lock)."""
    path = tmp_path / "state.db"
    build(path, f"PRAGMA user_version = {LATEST + 3};")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        with pytest.raises(SchemaTooNew, match=f"schema version {LATEST + 3}"):
            migrate(db)
    finally:
        db.close()


def test_no_module_of_the_gateway_creates_a_table_but_the_migrations() -> None:
    """One way a table comes to be: a module creating its own at first use (as usage and
    pairing once did) escapes the numbering and the tests above."""
    gateway = Path(__file__).resolve().parents[3] / "gateway"
    ddl = re.compile(
        r"\b(CREATE|ALTER|DROP)\s+(TABLE|INDEX|UNIQUE\s+INDEX|TRIGGER|VIEW)\b", re.IGNORECASE
    )
    found = [
        f"{path.relative_to(gateway.parent)}:{n}"
        for path in sorted(gateway.rglob("*.py"))
        if path.name != "migrations.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ddl.search(line)
    ]
    assert found == []
