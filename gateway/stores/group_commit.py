"""Group commit: the writes that arrive together share one transaction and one fsync.

Why: a write that gates an acknowledgement to a platform (the inbox record of a message)
must be on disk before its caller hears "recorded", so it commits with SQLite's
`synchronous=FULL`, which waits for an fsync of the write-ahead log (one to a few
milliseconds). One transaction per message made that fsync the ceiling of the whole gateway
(about 200 turns/s for one session, 164 for twenty at once). An fsync costs the same for one
write as for fifty: so the writes that arrive while a commit is on its way to disk wait for it
and then go together, in the next transaction, with one fsync. This is the classic
leader/follower scheme and needs no timer: a lone write finds no commit running and starts
its own at once; batches form only when writes queue up behind a commit.

Every write of the process goes through the one committer (one connection, one thread), the
bookkeeping ones too (`durable=False`: a batch of only those commits with `synchronous=NORMAL`
and no fsync of its own). Two connections writing one file wait for each other's lock in
SQLite's busy handler, which sleeps in growing steps; behind back-to-back durable commits a
bookkeeping write polled for its whole busy timeout and failed ("database is locked"). One
writer hands out turns in order instead. Reads do not come here: in WAL mode they run on
another connection, beside the writer, and see every commit that has returned.

An urgent write (`urgent=True`: the outbox mark after a platform accepted a send, see
gateway/pipeline/delivery.py) does not queue behind the others. A crash between the platform
accepting a message and its mark makes the restart send it again, so that window must be as
short as a commit: queued behind a batch of bookkeeping (usage ledger, previews) on its way
to an fsync, it was many milliseconds under load. An urgent write commits in a transaction
of its own, started from the `run()` call itself (no turn of the event loop):
- when the writer's thread is idle (nothing handed to it is still running), right there on
  the event loop's thread, if it is not durable (no fsync: a small WAL append, a fraction of
  a millisecond) and the write lock is free at once (busy timeout 0 for that one commit, and
  no automatic checkpoint in it, so the loop never waits for a disk or another process); on
  a loaded machine this saves waking the thread and its turns through the GIL, which were
  most of the mark's time;
- else it is handed to the thread, and commits (with the other urgent writes handed over
  meanwhile) as soon as the thread is free: after at most the one batch already running,
  before every batch still queued. That batch has no fsync unless an urgent write in it is
  durable.

What a caller can rely on:
- `run()` returns only after the COMMIT of the transaction that holds its write returned; a
  batch with a durable write in it commits with `synchronous=FULL`, so that COMMIT returned
  after the fsync. Nothing is reported written that is not on disk.
- A write that fails (a constraint, bad SQL) fails only its own caller; the rest of the
  batch commits without it (the batch is run again with each write under a SAVEPOINT, so a
  write must be a function of the database and its arguments: it may run twice, the first
  run rolled back).
- If the transaction fails as a whole (BEGIN, COMMIT, or SQLite rolled it back: disk full, an
  I/O error, another process holding the lock past the busy timeout), every caller in the
  batch gets the error, and none of their writes is in the database.
- Writes are applied in the order `run()` was called, except that an urgent write may commit
  before ordinary writes called earlier and still queued (never before one whose `run()`
  returned). So an urgent write must not depend on an ordinary write whose caller has not
  heard back. Urgent writes keep their order among themselves.
- In WAL mode the commits reach the disk in the order they were made (a power loss keeps a
  prefix of them): an urgent write without fsync is on disk before any later durable commit
  returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

# A write: statements run on the writer's connection, inside the batch's transaction, in the
# writer's thread. It returns what its caller gets (a row count, a row id), must not commit,
# and may run twice (a first run rolled back because another write of its batch failed).
Write = Callable[[sqlite3.Connection], T]


@dataclass(slots=True)
class _Queued:
    write: Write[Any]
    durable: bool
    future: asyncio.Future[Any]


class GroupCommitter:
    """The one writer of a SQLite database: `await run(write, durable=...)` per write."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], name: str = "db") -> None:
        # `connect` opens the connection, in the writer's thread; it must be in autocommit mode
        # (isolation_level=None): the committer opens and ends the transactions itself.
        self._connect = connect
        self._name = name
        self._connection: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._queue: list[_Queued] = []
        self._leader: asyncio.Task[None] | None = None
        # Urgent writes: handed to the thread under this lock (the thread takes them when it
        # starts their job); `_urgent_job` is set while a job that will take them is waiting
        # for the thread, so writes arriving meanwhile join it instead of starting another.
        self._urgent: list[_Queued] = []
        self._urgent_lock = threading.Lock()
        self._urgent_job = False
        self._urgent_jobs: set[asyncio.Future[Any]] = set()  # handed to the thread, not done
        # Jobs handed to the thread and not yet seen finished on the loop: while any is, the
        # connection belongs to the thread (an urgent write is then handed over, not run here).
        self._thread_jobs = 0
        self._busy_timeout_ms = 0  # the connection's own, put back after an urgent commit here
        self._autocheckpoint = 0
        self._synchronous = ""  # the level the connection commits with now
        self.commits = 0  # transactions committed (bench/turn_overhead.py and tests read them)
        self.writes = 0  # writes committed in them

    @property
    def is_open(self) -> bool:
        return self._connection is not None

    async def open(self) -> None:
        # Our own single thread, not the loop's default executor: the writes stay in order,
        # and a stop does not wait for other work's threads.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"{self._name}-writer")
        try:
            self._connection = await self._in_thread(self._connect)
            self._busy_timeout_ms, self._autocheckpoint = await self._in_thread(
                self._settings, self._connection
            )
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    async def close(self) -> None:
        """Let the queued writes commit, then close the connection and stop the thread."""
        while self._leader is not None or self._urgent_jobs:
            await asyncio.shield(
                asyncio.gather(
                    *([self._leader] if self._leader is not None else []),
                    *self._urgent_jobs,
                    return_exceptions=True,
                )
            )
        connection, executor = self._connection, self._executor
        self._connection = self._executor = None
        if executor is None:
            return
        try:
            if connection is not None:
                await asyncio.get_running_loop().run_in_executor(executor, connection.close)
        finally:
            # The thread is idle now (its last job has returned): joining it is immediate,
            # and no thread of ours outlives close() (a test or `clawgate` exiting).
            executor.shutdown(wait=True)

    async def run(self, write: Write[T], *, durable: bool = False, urgent: bool = False) -> T:
        """Run `write` in the next transaction; return its result once that has committed.

        `durable`: the commit waits for the fsync (`synchronous=FULL`); otherwise it survives
        a crash of the process but maybe not a power loss (WAL with `synchronous=NORMAL`).
        `urgent`: not queued behind ordinary writes (see the module's docstring).
        """
        if self._connection is None or self._executor is None:
            raise sqlite3.ProgrammingError(f"the {self._name} database is not open")
        loop = asyncio.get_running_loop()
        queued = _Queued(write, durable, loop.create_future())
        if urgent:
            if durable or self._thread_jobs or not self._commit_here(queued):
                self._hand_over(queued, loop, self._executor)
        else:
            self._queue.append(queued)
            if self._leader is None:
                # A task of its own rather than the first caller's: a caller that is cancelled
                # must not take the commit of the others with it.
                self._leader = loop.create_task(self._lead())
        result: T = await queued.future
        return result

    async def _lead(self) -> None:
        """Commit batches while writes are queued: each batch is whatever queued up while the
        previous one was committing."""
        try:
            while self._queue:
                batch = [q for q in self._queue if not q.future.done()]  # skip the cancelled
                self._queue = []
                if batch:
                    await self._commit_batch(batch)
        finally:
            self._leader = None

    async def _commit_batch(self, batch: list[_Queued]) -> None:
        writes = [q.write for q in batch]
        durable = any(q.durable for q in batch)
        try:
            outcomes = await self._in_thread(self._commit, writes, durable)
        except BaseException as exc:  # the transaction failed: so did every write in it
            self._settle(batch, exc)
            if not isinstance(exc, Exception):
                raise
            return
        self._settle(batch, outcomes)

    def _commit_here(self, queued: _Queued) -> bool:
        """Commit one urgent write on this (the loop's) thread, the writer's thread being
        idle. False when the write lock is taken (another process writes): hand it over."""
        connection = self._connection
        assert connection is not None
        connection.execute("PRAGMA busy_timeout=0")
        connection.execute("PRAGMA wal_autocheckpoint=0")  # the thread's next commit does it
        try:
            outcome: list[tuple[bool, Any]] | BaseException = self._commit(
                [queued.write], durable=False
            )
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
                return False  # rolled back (a write may run twice)
            outcome = exc
        except Exception as exc:
            outcome = exc
        finally:
            connection.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            connection.execute(f"PRAGMA wal_autocheckpoint={self._autocheckpoint}")
        self._settle([queued], outcome)
        return True

    def _hand_over(
        self, queued: _Queued, loop: asyncio.AbstractEventLoop, executor: ThreadPoolExecutor
    ) -> None:
        """Give an urgent write to the thread now; its job commits every urgent write handed
        over until the thread starts it."""
        with self._urgent_lock:
            self._urgent.append(queued)
            if self._urgent_job:  # a job is waiting for the thread: it will take this one
                return
            self._urgent_job = True
        # The executor's one thread runs jobs in the order they were submitted: this one
        # right after the batch it is committing now, before the leader hands it the next.
        job = asyncio.wrap_future(executor.submit(self._commit_urgent), loop=loop)
        self._thread_jobs += 1
        self._urgent_jobs.add(job)
        job.add_done_callback(self._urgent_done)

    def _urgent_done(self, job: asyncio.Future[Any]) -> None:
        self._thread_jobs -= 1
        self._urgent_jobs.discard(job)
        if job.cancelled():  # the loop is going away
            return
        batch, outcome = job.result()
        self._settle(batch, outcome)

    def _settle(
        self,
        batch: list[_Queued],
        outcome: list[tuple[bool, Any]] | BaseException,
    ) -> None:
        """Tell each caller of a committed (or failed) batch how its write went."""
        if isinstance(outcome, BaseException):  # the transaction failed: so did every write
            for queued in batch:
                if queued.future.done():
                    continue
                if isinstance(outcome, asyncio.CancelledError):  # the loop is going away
                    queued.future.cancel()
                else:
                    queued.future.set_exception(outcome)
            return
        self.commits += 1
        self.writes += sum(ok for ok, _ in outcome)
        for queued, (ok, value) in zip(batch, outcome, strict=True):
            if queued.future.done():  # the caller was cancelled meanwhile (it still committed)
                continue
            if ok:
                queued.future.set_result(value)
            else:
                queued.future.set_exception(value)

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            raise sqlite3.ProgrammingError(f"the {self._name} database is not open")
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(self._executor, function, *args)
        self._thread_jobs += 1  # until the thread is done with it, whoever still waits
        job.add_done_callback(self._thread_job_done)
        # Shielded: the thread goes on regardless; cancelling the wait would only hide the
        # outcome of a commit from the callers waiting for it.
        return await asyncio.shield(job)

    def _thread_job_done(self, _job: asyncio.Future[Any]) -> None:
        self._thread_jobs -= 1

    # -- in the writer's thread (and `_commit` for an urgent write on the loop's, see above) --

    @staticmethod
    def _settings(connection: sqlite3.Connection) -> tuple[int, int]:
        """The connection's busy timeout (ms) and automatic checkpoint (pages), as opened."""
        busy = connection.execute("PRAGMA busy_timeout").fetchone()[0]
        pages = connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        return int(busy), int(pages)

    def _commit_urgent(self) -> tuple[list[_Queued], list[tuple[bool, Any]] | BaseException]:
        """The urgent writes handed over so far, in one transaction of their own."""
        with self._urgent_lock:
            batch, self._urgent = self._urgent, []
            self._urgent_job = False
        try:
            return batch, self._commit([q.write for q in batch], any(q.durable for q in batch))
        except BaseException as exc:  # told to every caller of the batch, on the loop
            return batch, exc

    def _commit(self, writes: list[Write[Any]], durable: bool) -> list[tuple[bool, Any]]:
        """One transaction for all `writes`: (ok, result or exception) for each."""
        connection = self._connection
        if connection is None:
            raise sqlite3.ProgrammingError(f"the {self._name} database is not open")
        synchronous = "FULL" if durable else "NORMAL"
        if synchronous != self._synchronous:  # takes effect from the next commit
            connection.execute(f"PRAGMA synchronous={synchronous}")
            self._synchronous = synchronous
        try:
            return self._transaction(connection, writes, isolated=False)
        except _WriteFailed:
            # Writes rarely fail (the statements here ignore duplicates), so the batch runs
            # without savepoints first: each statement is a trip through the GIL, and the
            # event loop holds it most of the time under load. When one failed, that run was
            # rolled back whole; again, each write under its own savepoint.
            return self._transaction(connection, writes, isolated=True)

    @staticmethod
    def _transaction(
        connection: sqlite3.Connection, writes: list[Write[Any]], *, isolated: bool
    ) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = []
        connection.execute("BEGIN IMMEDIATE")
        try:
            for write in writes:
                if isolated:
                    connection.execute("SAVEPOINT write")
                try:
                    outcomes.append((True, write(connection)))
                except Exception as exc:
                    if not connection.in_transaction:  # SQLite rolled back the whole batch
                        raise
                    if not isolated:
                        raise _WriteFailed from exc
                    connection.execute("ROLLBACK TO write")
                    outcomes.append((False, exc))
                if isolated:
                    connection.execute("RELEASE write")
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # the first error is the one to tell
                    connection.execute("ROLLBACK")
            raise
        return outcomes


class _WriteFailed(Exception):
    """A write of a batch run without savepoints failed: run the batch again with them."""
