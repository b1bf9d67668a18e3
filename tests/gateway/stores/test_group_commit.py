"""Group commit (gateway/stores/group_commit.py): writes that arrive together share one commit,
each caller hears back only after the commit that holds its write, a failed commit fails
every caller in it. Commits are counted from the write-ahead log on disk, not taken from the
committer's word."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from channels.base import InboundMessage
from gateway.agent.metrics import GatewayMetrics
from gateway.pipeline.delivery import Delivery
from gateway.stores import database as state_module
from gateway.stores.group_commit import GroupCommitter
from gateway.stores.state import StateDB, state_path
from tests.fakes.channel import RecordingChannel


def _msg(i: int, chat: str = "c1") -> InboundMessage:
    return InboundMessage(
        "telegram",
        chat,
        f"u-{chat}",
        f"hello {i}",
        message_id=str(i),
        received_at=datetime.now(UTC),
    )


def wal_commits(db_path: Path) -> int:
    """Transactions in the write-ahead log: frames of the current log generation (their salt
    is the header's) whose 'database size after commit' field is set (sqlite.org/fileformat)."""
    data = Path(f"{db_path}-wal").read_bytes()
    if len(data) < 32:
        return 0
    page_size = int.from_bytes(data[8:12], "big")
    salt = data[16:24]
    commits, offset = 0, 32
    while offset + 24 + page_size <= len(data):
        frame = data[offset : offset + 24]
        if frame[8:16] != salt:
            break
        commits += int.from_bytes(frame[4:8], "big") != 0
        offset += 24 + page_size
    return commits


async def test_inbox_records_that_arrive_together_share_one_commit(tmp_path):
    async with StateDB.for_root(tmp_path) as state:
        on_disk, counted = wal_commits(state_path(tmp_path)), state.writer.commits
        messages = [_msg(i) for i in range(50)]
        # The same message twice in one batch: recorded once, the second is a redelivery.
        added = await asyncio.gather(
            *(state.inbox.record_inbound(m) for m in [*messages, messages[7]])
        )
        assert added == [True] * 50 + [False]
        commits = wal_commits(state_path(tmp_path)) - on_disk
        assert commits == state.writer.commits - counted
        assert 1 <= commits <= 2  # not one per message: 50 records, at most two fsyncs
        pending = await state.inbox.pending_inbound()
        assert [m.message_id for m in pending] == [str(i) for i in range(50)]
        assert not any(await asyncio.gather(*(state.inbox.record_inbound(m) for m in messages)))


async def test_a_lone_write_commits_by_itself_and_writes_keep_their_order(tmp_path):
    async with StateDB.for_root(tmp_path) as state:
        on_disk = wal_commits(state_path(tmp_path))
        assert await state.inbox.record_inbound(_msg(1))  # nothing else queued: its own commit
        assert wal_commits(state_path(tmp_path)) == on_disk + 1
        await asyncio.gather(*(state.offsets.save_offset("telegram", n) for n in range(1, 31)))
        assert await state.offsets.load_offset("telegram") == 30


async def test_bookkeeping_writes_beside_a_stream_of_durable_ones_all_succeed(tmp_path):
    # Two connections used to fight over SQLite's write lock here ("database is locked").
    async with StateDB.for_root(tmp_path) as state:
        durable = [state.inbox.record_inbound(_msg(i, chat=f"c{i % 7}")) for i in range(300)]
        bookkeeping = [
            state.outbox.enqueue_outbound("telegram", f"c{i % 7}", f"reply {i}", key=f"k{i}")
            for i in range(300)
        ]
        results = await asyncio.gather(*durable, *bookkeeping)
        assert all(results[:300]) and len(set(results[300:])) == 300
        assert state.writer.commits < 600


def _committer(path: Path, timeout: float = 0.05, **pragmas: str) -> GroupCommitter:
    def connect() -> sqlite3.Connection:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout)
        db.execute("PRAGMA journal_mode=WAL")
        for name, value in pragmas.items():
            db.execute(f"PRAGMA {name}={value}")
        return db

    return GroupCommitter(connect, "test")


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:  # another connection: what is on disk for everyone
        return list(db.execute(sql))


def _insert(value: str):
    return lambda db: db.execute("INSERT INTO log (value) VALUES (?)", (value,)).lastrowid


async def _open_log(
    tmp_path: Path, *, unique: bool = False, timeout: float = 0.05
) -> tuple[Path, GroupCommitter]:
    """A database with one table `log (value)`, and its committer, open."""
    path = tmp_path / "t.db"
    _rows(path, f"CREATE TABLE log (value TEXT{' UNIQUE' if unique else ''})")
    committer = _committer(path, timeout=timeout)
    await committer.open()
    return path, committer


async def test_a_write_that_fails_fails_only_its_caller(tmp_path):
    path, committer = await _open_log(tmp_path, unique=True)
    try:
        outcomes = await asyncio.gather(
            committer.run(_insert("a"), durable=True),
            committer.run(_insert("b")),
            committer.run(_insert("a")),  # breaks UNIQUE: undone alone
            committer.run(_insert("c"), durable=True),
            return_exceptions=True,
        )
        assert (committer.commits, committer.writes) == (1, 3)
    finally:
        await committer.close()
    assert isinstance(outcomes[2], sqlite3.IntegrityError)
    assert [o for i, o in enumerate(outcomes) if i != 2] == [1, 2, 3]
    assert _rows(path, "SELECT value FROM log ORDER BY rowid") == [("a",), ("b",), ("c",)]


async def test_a_failed_commit_fails_every_caller_in_its_batch_and_keeps_none(tmp_path):
    path = tmp_path / "t.db"
    _rows(path, "CREATE TABLE log (value TEXT)")
    _rows(path, "CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    _rows(
        path,
        "CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)",
    )
    committer = _committer(path, foreign_keys="ON")
    await committer.open()
    try:
        # Each write succeeds on its own; the orphan row is caught at COMMIT (a deferred
        # foreign key), so the transaction of all five fails.
        orphan = committer.run(lambda db: db.execute("INSERT INTO child VALUES (42)").rowcount)
        outcomes = await asyncio.gather(
            *(committer.run(_insert(v), durable=True) for v in "abcd"),
            orphan,
            return_exceptions=True,
        )
        assert all(isinstance(o, sqlite3.IntegrityError) for o in outcomes), outcomes
        assert committer.commits == 0
        assert _rows(path, "SELECT count(*) FROM log") == [(0,)]
        assert await committer.run(_insert("after"), durable=True) == 1  # the writer goes on
    finally:
        await committer.close()
    assert _rows(path, "SELECT value FROM log") == [("after",)]


async def test_a_record_whose_commit_fails_is_not_reported_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(state_module, "BUSY_TIMEOUT_SECONDS", 0.05)
    async with StateDB.for_root(tmp_path) as state:
        holder = sqlite3.connect(state.path, isolation_level=None)  # another process's write
        holder.execute("BEGIN IMMEDIATE")
        try:
            outcomes = await asyncio.gather(
                *(state.inbox.record_inbound(_msg(i)) for i in range(5)), return_exceptions=True
            )
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert all(isinstance(o, sqlite3.OperationalError) for o in outcomes), outcomes
        assert await state.inbox.pending_inbound() == []
        # Not "seen before" when the platform delivers it again: it was never recorded.
        assert await state.inbox.record_inbound(_msg(3))


async def test_writes_after_close_are_refused(tmp_path):
    state = await StateDB.for_root(tmp_path).open()
    await state.close()
    with pytest.raises(RuntimeError, match="not open"):
        await state.inbox.record_inbound(_msg(1))


class _SlowBatch:
    """An ordinary write that holds the writer's thread until `release()`: the slow batch of
    bookkeeping a mark used to queue behind (a usage ledger, previews, an fsync under load)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __call__(self, db: sqlite3.Connection) -> int:
        self.entered.set()
        self.gate.wait(10)
        return db.execute("INSERT INTO log (value) VALUES ('slow')").lastrowid

    async def running(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 10), "the slow write never ran"

    def release(self) -> None:
        self.gate.set()


async def _let_ready_tasks_step(times: int = 3) -> None:
    """Each yield lets every task that is ready take one step: ordering, not a timed wait
    (nothing here waits on I/O or a clock)."""
    for _ in range(times):
        await asyncio.sleep(0)


async def test_an_urgent_write_commits_before_the_writes_queued_ahead_of_it(tmp_path):
    path, committer = await _open_log(tmp_path)
    slow = _SlowBatch()
    try:
        first = asyncio.create_task(committer.run(slow))
        await slow.running()
        # Ordinary writes queue behind the running batch; then urgent ones arrive.
        queued = [
            asyncio.create_task(committer.run(_insert(f"b{i}"), durable=True)) for i in range(3)
        ]
        urgent = [
            asyncio.create_task(committer.run(_insert(f"u{i}"), urgent=True)) for i in range(5)
        ]
        await _let_ready_tasks_step()
        on_disk = wal_commits(path)
        slow.release()
        await asyncio.gather(first, *queued, *urgent)
        # The urgent writes, handed over together, share one commit of their own, between
        # the batch that was running and the one queued before them.
        assert wal_commits(path) - on_disk == 3
    finally:
        await committer.close()
    assert [v for (v,) in _rows(path, "SELECT value FROM log ORDER BY rowid")] == [
        "slow",
        "u0",
        "u1",
        "u2",
        "u3",
        "u4",
        "b0",
        "b1",
        "b2",
    ]


async def test_a_failing_urgent_write_fails_only_its_caller_and_close_waits_for_urgent_ones(
    tmp_path,
):
    path, committer = await _open_log(tmp_path, unique=True)
    slow = _SlowBatch()
    first = asyncio.create_task(committer.run(slow))
    await slow.running()
    outcomes = asyncio.gather(
        committer.run(_insert("a"), urgent=True),
        committer.run(_insert("a"), urgent=True),
        committer.run(_insert("b"), urgent=True, durable=True),
        return_exceptions=True,
    )
    await _let_ready_tasks_step()
    slow.release()
    await committer.close()  # the urgent writes handed over commit before the connection goes
    assert first.done() and outcomes.done()
    results = outcomes.result()
    assert results[0] == 2 and results[2] == 3
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert _rows(path, "SELECT value FROM log ORDER BY rowid") == [("slow",), ("a",), ("b",)]


async def test_a_sent_mark_commits_before_the_bookkeeping_queued_ahead_of_it(tmp_path):
    """The crash window of issue 32: the platform accepted a reply while the writer was busy
    with a slow batch and more bookkeeping (a preview, a usage row, an offset) was queued. The
    sent mark used to join the queue and commit after all of it (a kill meanwhile sent the
    reply again after the restart); now its own commit comes first, and the queued
    bookkeeping's transaction already sees the row as sent."""
    async with StateDB.for_root(tmp_path) as state:
        row = await state.outbox.enqueue_outbound("fakechat", "c1", "the reply")
        assert row is not None
        await state.database.write("CREATE TABLE log (value TEXT)")
        channel = RecordingChannel()
        delivery = Delivery({"fakechat": channel}, state.outbox, state.inbox, GatewayMetrics())
        slow = _SlowBatch()
        busy = asyncio.create_task(state.writer.run(slow))
        await slow.running()

        def outbox_status(db: sqlite3.Connection) -> str:  # inside the bookkeeping's batch
            return str(db.execute("SELECT status FROM outbox WHERE id = ?", (row,)).fetchone()[0])

        bookkeeping = [
            asyncio.create_task(state.previews.record_preview("k1", "fakechat", "c1", "17")),
            asyncio.create_task(state.database.write("INSERT INTO log (value) VALUES ('usage')")),
            asyncio.create_task(state.offsets.save_offset("fakechat", 42)),
            asyncio.create_task(state.writer.run(outbox_status)),
        ]
        assert await delivery.resume() == 1  # the pending row is sent: the platform accepts
        await channel.wait_for(1)
        await _let_ready_tasks_step()  # the mark is asked for now (not later than this)
        slow.release()
        *_, seen_by_bookkeeping = await asyncio.gather(busy, *bookkeeping)
        await delivery.drain()
        assert seen_by_bookkeeping == "sent"
        assert await state.outbox.pending_outbound() == []
        await delivery.close()


async def test_an_urgent_write_waits_in_the_writers_thread_while_another_process_has_the_lock(
    tmp_path,
):
    """An urgent write on an idle writer commits right away on the loop's thread, but only if
    the write lock is free at once: with another process holding it (`clawgate pairing
    approve`) the write is neither failed nor lost, it waits for the lock in the writer's
    thread while the loop goes on, and commits once the lock is free."""
    path, committer = await _open_log(tmp_path, timeout=5.0)
    try:
        assert await committer.run(_insert("idle"), urgent=True) == 1  # idle: done at once
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            waiting = asyncio.create_task(committer.run(_insert("held"), urgent=True))
            await _let_ready_tasks_step()
            assert not waiting.done()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert await waiting == 2  # the writer's thread took the lock once it was free
    finally:
        await committer.close()
    assert _rows(path, "SELECT value FROM log ORDER BY rowid") == [("idle",), ("held",)]


async def test_an_urgent_write_on_an_idle_writer_that_fails_fails_only_itself(tmp_path):
    path, committer = await _open_log(tmp_path, unique=True)
    try:
        assert await committer.run(_insert("a"), urgent=True) == 1
        with pytest.raises(sqlite3.IntegrityError):
            await committer.run(_insert("a"), urgent=True)
        assert await committer.run(_insert("b"), urgent=True) == 2
        assert await committer.run(_insert("c"), durable=True) == 3  # the writer goes on
    finally:
        await committer.close()
    assert _rows(path, "SELECT value FROM log ORDER BY rowid") == [("a",), ("b",), ("c",)]
