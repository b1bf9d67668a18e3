"""One scheduler for the whole gateway: a heap of next-due times, and a fire protocol that
neither loses nor repeats a run across crashes.

The heap holds one entry per job (its next run) and one per run waiting for a retry; one task
sleeps until the earliest entry (at most `max_wait` at a time, so a wall-clock jump is noticed)
and is woken early when a job is added or changed. Entries are invalidated lazily: a job's entry
carries a generation number, and a popped entry whose generation is stale is dropped.

Fire protocol, for each run (job id + due time = the run's idempotency key):
1. claim: the run is appended to the workspace's state journal as pending, with the job's
   advanced `last_due`; the claims of every workspace with a run due in this pass are one group
   commit (see `files.commit`), and no run is handed over before its claim is on disk;
2. an agent task runs its light turn; its reply is journaled into the pending record, so a
   retry or a restart delivers that same reply instead of asking the model again;
3. deliver: `host.deliver(..., key=key)`;
4. confirm: a `done` line (written soon after, grouped with others; a clean stop writes it).
A kill before 1 leaves the run due (it fires at the next start, late if it is); a kill between
1 and 4 leaves it pending, and the next start delivers it again with the same key. The host's
delivery outbox drops a key it has already accepted, so the person gets it once. The window
that remains is the outbox's own: between the platform accepting a message and the outbox
recording that, a crash sends it again (Telegram and Discord take no idempotency key). Without
an outbox that deduplicates, the window is between steps 3 and 4.

Late runs: a run found more than `late_after` past due (the gateway was down, or the machine
slept) is delivered once with a marker ("(late: due 14:00)"); a run more than `grace` past due
is skipped. A recurring job that missed several runs delivers only the latest one inside the
grace window; the others count as skipped. Failed deliveries are retried after each of
`retry_delays`, then counted as failed and dropped.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import zlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo

from heartbeat.ack import check_reply
from memory.layout import SCHEDULE_FILE
from scheduler.files import commit
from scheduler.jobs import (
    Job,
    JobFile,
    ScheduleFileError,
    file_signature,
    read_jobs,
    schedule_path,
)
from scheduler.state import Pending, ScheduleState, delivery_key, load_state, state_path
from scheduler.wording import late_marker

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
MAX_COUNTED_SKIPS = 1000


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...


class SchedulerHost(Protocol):
    """What the scheduler needs from the gateway (a fake in tests)."""

    async def deliver(self, person_id: str, workspace: Path, text: str, *, key: str) -> None:
        """Send `text` to the person's last DM route through the delivery outbox and append it
        to their DM transcript. A second call with a key already accepted must send nothing.
        Raise when it cannot be accepted (no DM route yet, outbox unavailable): it is retried.
        """
        ...

    async def agent_turn(self, person_id: str, workspace: Path, prompt: str) -> str:
        """Run `prompt` as an isolated light turn in the owner's private context (like a
        heartbeat); return the reply. An acknowledgement (HEARTBEAT_OK, empty) is not sent."""
        ...


@dataclass(frozen=True, slots=True)
class WorkspaceRef:
    person_id: str
    path: Path
    zone: ZoneInfo


@dataclass(frozen=True, slots=True)
class SchedulerPolicy:
    grace: timedelta = timedelta(hours=12)
    late_after: timedelta = timedelta(seconds=60)
    retry_delays: tuple[float, ...] = (30.0, 120.0, 600.0, 1800.0, 3600.0)
    agent_timeout: float = 180.0
    max_wait: float = 30.0
    rescan_seconds: float = 30.0
    ack_max_chars: int = 300


@dataclass(slots=True)
class SchedulerMetrics:
    """Plain counters since start (the gateway exports them); `jobs` is set on read."""

    jobs: int = 0
    fired: int = 0
    late: int = 0
    skipped: int = 0
    failed: int = 0
    silent: int = 0  # agent tasks whose reply was an acknowledgement: nothing sent

    def as_dict(self) -> dict[str, int]:
        return {
            "jobs": self.jobs,
            "fired": self.fired,
            "late": self.late,
            "skipped": self.skipped,
            "failed": self.failed,
            "silent": self.silent,
        }


@dataclass(eq=False)
class _Space:
    """A workspace as the scheduler holds it."""

    ref: WorkspaceRef
    jobs: dict[int, Job] = field(default_factory=dict)
    state: ScheduleState = field(default_factory=ScheduleState)
    signature: tuple[int, int, int] | None = None
    problems: list[str] = field(default_factory=list)
    generation: dict[int, int] = field(default_factory=dict)
    next_due: dict[int, datetime] = field(default_factory=dict)
    tail: asyncio.Task[None] | None = None


# A heap entry: (due timestamp, sequence, person id, job id, generation, pending key or "").
_Entry = tuple[float, int, str, int, int, str]


class Scheduler:
    """The heap and the fire protocol (module doc). Its host (delivery and light turns) is
    given when it starts, as a channel gets its handler: the host's turns use tools that
    tell this scheduler about changed jobs, so the scheduler exists before the host."""

    def __init__(
        self,
        discover: Callable[[], Iterable[WorkspaceRef]],
        clock: Clock,
        *,
        policy: SchedulerPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.discover = discover
        self.clock = clock
        self.policy = policy or SchedulerPolicy()
        self.sleep = sleep
        self._metrics = SchedulerMetrics()
        self._spaces: dict[str, _Space] = {}
        self._heap: list[_Entry] = []
        self._seq = itertools.count()
        self._generations = itertools.count(1)
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._dirty: dict[str, _Space] = {}  # state changed in memory, not yet on disk
        self._write_lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None
        self._last_scan = float("-inf")
        self._host: SchedulerHost | None = None  # while running (`start`)

    # -- public -----------------------------------------------------------------------------

    @property
    def metrics(self) -> SchedulerMetrics:
        self._metrics.jobs = sum(len(space.next_due) for space in self._spaces.values())
        return self._metrics

    def next_run(self, person_id: str, job_id: int) -> datetime | None:
        space = self._spaces.get(person_id)
        return None if space is None else space.next_due.get(job_id)

    def problems(self, person_id: str) -> list[str]:
        space = self._spaces.get(person_id)
        return [] if space is None else list(space.problems)

    async def load(self) -> None:
        """Read every workspace's jobs and state and fill the heap (called by `start`)."""
        refs = list(await asyncio.to_thread(lambda: list(self.discover())))
        loaded = await asyncio.to_thread(self._read_all, refs)
        self._spaces.clear()
        self._heap.clear()
        for space in loaded:
            self._spaces[space.ref.person_id] = space
            self._plan_space(space)
        self._last_scan = self.clock.now().timestamp()
        log.info("scheduler: %d job(s) in %d workspace(s)", self.metrics.jobs, len(loaded))

    @property
    def running(self) -> bool:
        return self._runner is not None

    @property
    def host(self) -> SchedulerHost:
        if self._host is None:
            raise RuntimeError("the scheduler has no host before it starts")
        return self._host

    async def start(self, host: SchedulerHost) -> None:
        """Load every workspace and fire from now on, delivering through `host`."""
        self._host = host
        await self.load()
        self._runner = asyncio.create_task(self._run(), name="scheduler")
        # Write the next runs computed at load, so the next start need not compute them.
        self._request_flush()

    async def stop(self) -> None:
        """Stop firing. Runs in flight are cancelled; their claims make the next start
        deliver them (same key, so never twice)."""
        tasks = [t for t in (self._runner, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._runner = None
        self._tasks.clear()
        try:  # confirmations not yet written: write them, or the next start resends (same key)
            await self._flush()
        except Exception:
            log.exception("scheduler: writing the state at stop failed")

    async def idle(self) -> None:
        """Wait until no delivery is in flight (tests and the benchmark)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def reload(self, person_id: str | None = None) -> None:
        """Re-read job lists that changed on disk (all, or one person's) and workspaces that
        appeared. The tools call it after a change; the timer calls it every rescan."""
        self._last_scan = self.clock.now().timestamp()  # even if this pass fails: no spin
        refs = {
            ref.person_id: ref for ref in await asyncio.to_thread(lambda: list(self.discover()))
        }
        for pid, ref in refs.items():
            if person_id is not None and pid != person_id:
                continue
            try:
                await self._reload_one(pid, ref)
            except Exception:  # one workspace's trouble is its own: the others go on
                log.exception("schedule of %s: reloading failed", pid)
        self._last_scan = self.clock.now().timestamp()

    async def _reload_one(self, pid: str, ref: WorkspaceRef) -> None:
        space = self._spaces.get(pid)
        if space is None:
            space = (await asyncio.to_thread(self._read_all, [ref]))[0]
            self._spaces[pid] = space
            self._plan_space(space)
            return
        zone_changed = space.ref.zone.key != ref.zone.key
        space.ref = ref
        signature = await asyncio.to_thread(file_signature, schedule_path(ref.path))
        if signature != space.signature or zone_changed:
            await self._refresh(space, replan_all=zone_changed)

    async def fire_due(self) -> int:
        """Start every run that is due now; returns how many entries were taken."""
        now = self.clock.now()
        taken: dict[str, list[_Entry]] = {}
        count = 0
        while self._heap and self._heap[0][0] <= now.timestamp():
            entry = heapq.heappop(self._heap)
            if self._valid(entry):
                taken.setdefault(entry[2], []).append(entry)
                count += 1
        claimed = [
            (self._spaces[pid], self._dispatch(self._spaces[pid], entries, now))
            for pid, entries in taken.items()
        ]
        if claimed:
            try:
                await self._flush()  # the claims of every workspace: one group commit
            except Exception:
                # Delivering anyway is safe: a crash before the claim is on disk makes the
                # next start fire these runs again with the same keys, which the outbox drops.
                log.exception("scheduler: writing the claims failed; delivering anyway")
        for space, keys in claimed:
            previous = space.tail
            task = asyncio.create_task(
                self._deliver_all(space, keys, previous), name=f"schedule:{space.ref.person_id}"
            )
            space.tail = task
            self._track(task)
        return count

    # -- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        failure = ""  # the last pass's error, logged once however often it repeats
        while True:
            try:
                await self.fire_due()
                now = self.clock.now().timestamp()
                if now - self._last_scan >= self.policy.rescan_seconds:
                    await self.reload()
                    continue
                failure = ""
            except Exception as exc:
                # Never a hot loop: the pass counts as a scan, so the next one waits its turn.
                self._last_scan = self.clock.now().timestamp()
                if f"{type(exc).__name__}: {exc}" != failure:
                    failure = f"{type(exc).__name__}: {exc}"
                    log.exception(
                        "scheduler: a pass failed; going on (logged once until it changes)"
                    )
            await self._wait()

    async def _wait(self) -> None:
        now = self.clock.now().timestamp()
        delay = min(self.policy.max_wait, self._last_scan + self.policy.rescan_seconds - now)
        if self._heap:
            delay = min(delay, max(0.0, self._heap[0][0] - now))
        if delay <= 0:
            await asyncio.sleep(0)
            return
        self._wake.clear()
        sleeper = asyncio.ensure_future(self.sleep(delay))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    # -- reading ----------------------------------------------------------------------------

    def _read_all(self, refs: list[WorkspaceRef]) -> list[_Space]:
        spaces = []
        for ref in refs:
            try:
                state = load_state(ref.path)
            except Exception as exc:  # load_state is total; this is the last line of defence
                log.warning(
                    "schedule state of %s unreadable (%s); starting empty",
                    ref.person_id,
                    type(exc).__name__,
                )
                state = ScheduleState(needs_compaction=True)
            space = _Space(ref, state=state)
            self._read_jobs(space)
            spaces.append(space)
        return spaces

    @staticmethod
    def _read_jobs(space: _Space) -> bool:
        """Refresh `space.jobs` from its file; False (and the old jobs kept) when unreadable.

        Whatever is wrong with the file, it is one problem of this workspace, logged once per
        version of the file (the signature is kept, so an unchanged file is not read again)."""
        try:
            parsed: JobFile = read_jobs(space.ref.path, space.ref.zone)
        except Exception as exc:  # ScheduleFileError, or anything read_jobs did not foresee
            reason = (
                str(exc)
                if isinstance(exc, ScheduleFileError)
                else f"{SCHEDULE_FILE} cannot be read ({type(exc).__name__})"
            )
            log.warning(
                "schedule of %s: %s; keeping the jobs read before", space.ref.person_id, reason
            )
            space.problems = [reason]
            try:
                space.signature = file_signature(schedule_path(space.ref.path))
            except OSError:
                space.signature = None
            return False
        for problem in parsed.problems:
            log.warning("schedule of %s: %s", space.ref.person_id, problem)
        space.jobs = {job.id: job for job in parsed.jobs}
        space.problems = parsed.problems
        space.signature = parsed.signature
        return True

    async def _refresh(self, space: _Space, *, replan_all: bool) -> None:
        before = dict(space.jobs)
        if not await asyncio.to_thread(self._read_jobs, space):
            return
        for job_id in set(before) - set(space.jobs):  # removed: invalidate, forget
            self._invalidate(space, job_id)
            space.next_due.pop(job_id, None)
            space.state.forget(job_id)
        now = self.clock.now()
        for job_id, job in space.jobs.items():
            old = before.get(job_id)
            if old is None:
                self._plan_job(space, job)
            elif replan_all or old.entry() != job.entry():
                self._plan_job(space, job, since=now)
        self._mark(space)
        await self._flush()

    # -- planning ---------------------------------------------------------------------------

    def _plan_space(self, space: _Space) -> None:
        for job in space.jobs.values():
            self._plan_job(space, job)
        now = self.clock.now().timestamp()
        for key, pending in space.state.pending.items():  # claimed before a stop: deliver
            self._push(now, space.ref.person_id, pending.job_id, 0, key)
        # Forget what the list no longer has (but not runs still pending).
        for job_id in set(space.state.jobs) - set(space.jobs):
            space.state.forget(job_id)
        if space.state.unwritten or space.state.needs_compaction:
            self._mark(space)

    def _plan_job(self, space: _Space, job: Job, *, since: datetime | None = None) -> None:
        """Put the job's next run on the heap. `since`: the job was edited or its zone changed
        at that moment; a repeating job then counts from there, so an edit never makes a run
        from before it look missed (a one-shot keeps its time, even a past one). A job whose
        run cannot be computed is left off the heap (logged), never stopping the others."""
        try:
            self._plan_job_unguarded(space, job, since)
        except Exception as exc:
            log.warning(
                "schedule of %s: job %d cannot be planned (%s: %s)",
                space.ref.person_id,
                job.id,
                type(exc).__name__,
                str(exc)[:120],
            )
            space.next_due.pop(job.id, None)

    def _plan_job_unguarded(self, space: _Space, job: Job, since: datetime | None) -> None:
        zone = space.ref.zone
        self._invalidate(space, job.id)
        record = space.state.record(job.id)
        basis = zlib.crc32(
            f"{job.when}|{job.created.isoformat()}|{zone.key}|"
            f"{record.last_due.isoformat() if record.last_due else ''}".encode()
        )
        if since is None and record.next_due is not None and record.basis == basis:
            due: datetime | None = record.next_due  # computed from the same inputs before
        else:
            try:
                if since is not None and job.recurring:
                    due = job.next_after(max(since, record.last_due or since), zone)
                elif record.last_due is None:
                    due = job.first(zone)
                else:
                    due = job.next_after(record.last_due, zone)
            except Exception as exc:  # a schedule that cannot be computed must not stop others
                log.warning("schedule of %s: job %d: %s", space.ref.person_id, job.id, exc)
                due = None
            space.state.planned(job.id, due, basis)
            self._mark(space)
        if due is None:
            space.next_due.pop(job.id, None)
            return
        space.next_due[job.id] = due
        self._push(due.timestamp(), space.ref.person_id, job.id, space.generation[job.id], "")

    def _invalidate(self, space: _Space, job_id: int) -> None:
        space.generation[job_id] = next(self._generations)  # unique: no stale entry matches

    def _push(self, when: float, person_id: str, job_id: int, generation: int, key: str) -> None:
        early = not self._heap or when < self._heap[0][0]
        heapq.heappush(self._heap, (when, next(self._seq), person_id, job_id, generation, key))
        if early:
            self._wake.set()

    def _valid(self, entry: _Entry) -> bool:
        _, _, person_id, job_id, generation, key = entry
        space = self._spaces.get(person_id)
        if space is None:
            return False
        if key:
            return key in space.state.pending
        return space.generation.get(job_id) == generation and job_id in space.jobs

    def _occurrence(
        self, space: _Space, job: Job, due: datetime, now: datetime
    ) -> tuple[datetime | None, int, datetime]:
        """For a run due at `due` (<= now): (the run to fire, or None to skip it; how many
        runs are skipped; the moment the next run is counted from)."""
        zone, grace = space.ref.zone, self.policy.grace
        skipped = 0
        if now - due > grace:
            if not job.recurring:
                return None, 1, due
            start = now - grace
            # Count the runs before the grace window (a bounded walk: a minutely job down for
            # a month is not worth 40,000 steps; past the bound the rest counts as one).
            skipped, cursor = 1, due
            while skipped < MAX_COUNTED_SKIPS:
                cursor_next = job.next_after(cursor, zone)
                if cursor_next is None or cursor_next > start:
                    break
                skipped, cursor = skipped + 1, cursor_next
            nxt = job.next_after(start, zone)
            if nxt is None or nxt > now:
                return None, skipped, start
            due = nxt
        if job.recurring:  # several runs missed: only the latest is delivered
            while (nxt := job.next_after(due, zone)) is not None and nxt <= now:
                due = nxt
                skipped += 1
        return due, skipped, due

    def _dispatch(self, space: _Space, entries: list[_Entry], now: datetime) -> list[str]:
        """Claim the runs of one workspace in memory; returns their keys, in order."""
        keys: list[str] = []
        for _, _, _, job_id, _, key in entries:
            if key:
                keys.append(key)  # a retry or a run claimed before the last stop
                continue
            job = space.jobs[job_id]
            due = space.next_due.pop(job_id, None)
            if due is None:  # already taken (cannot happen with unique generations)
                continue
            try:
                fire, skipped, counted_from = self._occurrence(space, job, due, now)
            except Exception as exc:  # a run that cannot be computed: this job stops here
                log.warning(
                    "schedule of %s: job %d stopped (%s)",
                    space.ref.person_id,
                    job_id,
                    type(exc).__name__,
                )
                self._invalidate(space, job_id)
                continue
            self._metrics.skipped += skipped
            if fire is None:
                space.state.skipped(job_id, counted_from)
                log.info(
                    "schedule of %s: job %d skipped (due %s, over the grace period)",
                    space.ref.person_id,
                    job_id,
                    due.isoformat(),
                )
            else:
                key = delivery_key(space.ref.person_id, job.id, job.created, fire)
                late = ""
                if now - fire > self.policy.late_after:
                    late = late_marker(fire, space.ref.zone, now)
                space.state.claim(key, job.id, fire, job.kind, job.text, late)
                keys.append(key)
            if job.recurring:
                self._plan_job(space, job)
            else:
                self._invalidate(space, job_id)
        self._mark(space)
        return keys

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- delivering -------------------------------------------------------------------------

    async def _deliver_all(
        self, space: _Space, keys: list[str], previous: asyncio.Task[None] | None
    ) -> None:
        if previous is not None:  # runs of one workspace go out in order
            await asyncio.wait({previous})  # its outcome is its own; our cancel still raises
        for key in keys:
            try:
                await self._deliver_one(space, key)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("schedule of %s: run %s failed", space.ref.person_id, key)
        self._mark(space)  # the confirmations: written soon, in a group with others
        self._request_flush()

    async def _deliver_one(self, space: _Space, key: str) -> None:
        pending = space.state.pending.get(key)
        if pending is None:
            return
        person_id, path = space.ref.person_id, space.ref.path
        try:
            if pending.kind == "agent" and pending.result is None:
                reply = await asyncio.wait_for(
                    self.host.agent_turn(person_id, path, pending.text), self.policy.agent_timeout
                )
                check = check_reply(reply, self.policy.ack_max_chars)
                if check.acknowledged:
                    self._finish(space, pending, "silent")
                    return
                space.state.set_result(key, check.text)
                self._mark(space)
                await self._flush()
            body = pending.result if pending.result is not None else pending.text
            text = f"{pending.late} {body}" if pending.late else body
            await self.host.deliver(person_id, path, text, key=key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._retry(space, pending, exc)
            return
        self._finish(space, pending, "late" if pending.late else "fired")

    def _finish(self, space: _Space, pending: Pending, outcome: str) -> None:
        space.state.done(pending.key, outcome)
        self._mark(space)
        if outcome == "silent":
            self._metrics.silent += 1
        elif outcome == "failed":
            self._metrics.failed += 1
        else:
            self._metrics.fired += 1
            if outcome == "late":
                self._metrics.late += 1

    def _retry(self, space: _Space, pending: Pending, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"[:200]
        delays = self.policy.retry_delays
        space.state.retried(pending.key, pending.attempts + 1, reason)
        self._mark(space)
        if pending.attempts > len(delays):
            log.warning(
                "schedule of %s: giving up on %s after %d attempts (%s)",
                space.ref.person_id,
                pending.key,
                pending.attempts,
                reason,
            )
            self._finish(space, pending, "failed")
            return
        delay = delays[pending.attempts - 1]
        log.warning(
            "schedule of %s: %s not delivered (%s); retrying in %.0f s",
            space.ref.person_id,
            pending.key,
            reason,
            delay,
        )
        when = self.clock.now().timestamp() + delay
        self._push(when, space.ref.person_id, pending.job_id, 0, pending.key)

    # -- writing ----------------------------------------------------------------------------

    def _mark(self, space: _Space) -> None:
        self._dirty[space.ref.person_id] = space

    async def _flush(self) -> None:
        """Write every changed state journal, as one group commit (see `files.commit`).

        One writer at a time; the lines are taken when the write starts, so the file always
        follows memory in order. A journal grown long (or damaged) is rewritten whole."""
        async with self._write_lock:
            if not self._dirty:
                return
            spaces = list(self._dirty.values())
            self._dirty.clear()
            appends: list[tuple[Path, str]] = []
            replaces: list[tuple[Path, str]] = []
            for space in spaces:
                state, path = space.state, state_path(space.ref.path)
                if state.needs_compaction or state.too_long():
                    text = state.snapshot()
                    replaces.append((path, text))
                    state.lines = text.count("\n")
                elif state.unwritten:
                    appends.append((path, "\n".join(state.unwritten) + "\n"))
                    state.lines += len(state.unwritten)
                state.unwritten.clear()
                state.needs_compaction = False
            if not appends and not replaces:
                return
            try:
                await asyncio.to_thread(commit, appends, replaces)
            except BaseException:
                # What reached the file is unknown: the next write rewrites it whole.
                for space in spaces:
                    space.state.needs_compaction = True
                    self._dirty.setdefault(space.ref.person_id, space)
                raise

    def _request_flush(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_all(), name="scheduler-write")
            self._track(self._flusher)

    async def _flush_all(self) -> None:
        while self._dirty:
            try:
                await self._flush()
            except Exception:
                log.exception("scheduler: writing the state failed; retrying in 5 s")
                await self.sleep(5.0)
