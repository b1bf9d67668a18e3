"""A kill -9 harness: `clawgate run` as a real process, killed at random points, restarted.

Several people write through the fake Telegram Bot API while the gateway, answering through
a fake Anthropic API that takes about `model_seconds` per answer, is killed with SIGKILL and
started again, `kills` times (seeded, so a run replays), then started one last time until
every message is answered. Used by tests/reliability/test_crash_safety.py (a short run) and
bench/crash_kill.py (100 kills and more, with the figures).

Three kinds of kill:

- during start-up (`startup_share`): imports, opening the state, resuming pending messages;
- at a random point of the work after the gateway first polls Telegram (after a random
  number of model calls, plus a random delay): intake, a model call, a transcript append,
  a send, a resumed turn;
- aimed at the window between the transcript and the outbox (`window_share` of the kills):
  the harness takes the state database's write lock (as another writer would hold it), waits
  until some turn appends its answer to a session transcript (it then waits for the lock to
  write its outbox row), and kills the process there. The reply is then on disk in the
  transcript and nowhere else. Meanwhile the fake platform holds sends (accepts none), so the
  lock never keeps an accepted send from being recorded (which would widen the crash window).

After each kill the harness counts the replies left in that state (`replies_in_window`: in a
transcript, their message still pending in the inbox), so a run shows it exercised the case.

What is checked (`KillReport`):
- lost: a message no reply answers (its token never came back);
- duplicates: a message answered more than once. Each is attributed to the crash window when,
  right after a kill, the state database still held its reply as pending in the outbox
  although the platform had accepted it (the restart sends it again); else it is unexplained;
- bad requests: a model request whose last message is not the person's (an empty or missing
  user message: the model is asked to answer nothing; the fake answers "ECHO: " to that, as
  the issue's harness did, so such a turn also loses its message);
- double answers: a message with two final answers in its session transcript;
- transcript lines present at a kill but missing later (each snapshot is a prefix of the end);
- every transcript line parses, every SQLite file passes integrity_check.

The send window (`MarkWatch`): from the fake platform accepting a reply to the moment its
outbox row is no longer pending, seen from another connection (so committed: a kill from then
on does not send it again). A thread polls the state database's `data_version` every half
millisecond and reads the pending rows when it changed; a window is known to within one poll.
Replies whose window a kill cut (the crash window itself) are counted apart.

Streaming is on, as by default: the fake model streams its answers in pieces
(`stream_delay` apart), so kills also land while a preview is being written. A reply is
what a chat shows in the end: a message's latest text (an edited preview that became the
reply counts once); a message still ending with the preview cursor is an unfinished
preview (`previews_left`), never a reply. `extra_env` runs the gateway with other settings
(`CLAWGATE_TELEGRAM__STREAMING_DRAFTS=false`: previews are edited messages the reply
replaces, rather than drafts).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import signal
import sqlite3
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from channels.preview import is_preview_text
from memory.sqlite import sqlite_module
from tests.fakes.llm_server import FakeAnthropicServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway

TOKEN = re.compile(r"M-(\d+)-X")
NOTHING = "ECHO: "  # what the fake model answers when the last message is not the person's


@dataclass(frozen=True)
class KillPlan:
    kills: int = 30
    people: tuple[int, ...] = (4101, 4102, 4103, 4104, 4105)
    messages: int = 120
    seed: int = 20261129
    model_seconds: float = 0.3
    window_share: float = 1 / 3
    startup_share: float = 0.1  # kills during start-up (imports, resuming what was pending)
    startup: tuple[float, float] = (0.2, 2.0)  # seconds after the spawn, for those
    # The others come after the gateway polls, once 0..`max_calls` more model calls were
    # made (or nothing is left to do: every message answered and sent), plus up to `after_call`
    # seconds: tied to the work done, not to the clock, so a slow machine (start-up takes
    # 1-15 s here) does not turn every kill into a start-up kill.
    max_calls: int = 12
    after_call: float = 0.6
    gap: tuple[float, float] = (0.05, 0.6)  # seconds between two messages (all people)
    drain_seconds: float = 120.0
    stream_delay: float = 0.02  # seconds between two streamed pieces of an answer
    extra_env: tuple[tuple[str, str], ...] = ()


@dataclass
class Kill:
    at: float
    aimed: bool
    # Replies the platform had accepted whose outbox row was still pending at the kill (the
    # crash window): (chat, message number). The restart sends each of these again.
    unrecorded: set[tuple[str, int]]


@dataclass
class KillReport:
    plan: KillPlan
    kills: list[Kill] = field(default_factory=list)
    replies_in_window: int = 0  # replies found in a transcript but not the outbox at a kill
    aimed_hits: int = 0  # aimed kills that came while an answer waited for its outbox row
    sent: int = 0
    lost: dict[str, list[int]] = field(default_factory=dict)
    duplicates: int = 0
    window_duplicates: int = 0
    window_after_aimed: int = 0  # of those, caught by an aimed kill
    unexplained: list[str] = field(default_factory=list)
    bad_requests: int = 0
    double_answers: list[str] = field(default_factory=list)
    lines_lost: list[str] = field(default_factory=list)
    seconds: float = 0.0
    max_retries_seen: int = 0
    given_up: int = 0
    previews_left: int = 0  # preview messages left unfinished (a kill before their id was kept)
    preview_updates: int = 0  # drafts and preview edits the platform accepted
    # Send windows (MarkWatch), seconds: platform accepted a reply -> its row seen marked.
    windows: list[float] = field(default_factory=list)
    windows_cut: int = 0  # replies whose window a kill cut (no mark before the kill)
    windows_unseen: int = 0  # replies whose row the watch never saw pending, then marked
    watch_errors: list[str] = field(default_factory=list)  # the watch's failed reads
    watch_longest_gap: float = 0.0  # seconds: the watch's longest wait between two reads

    def window_ms(self, quantile: float) -> float:
        """A quantile of the send windows in milliseconds (0 when none was measured)."""
        if not self.windows:
            return 0.0
        if len(self.windows) == 1:
            return 1000 * self.windows[0]
        cuts = statistics.quantiles(self.windows, n=100, method="inclusive")
        return 1000 * (cuts[round(quantile * 100) - 1] if quantile < 1 else max(self.windows))

    @property
    def lost_count(self) -> int:
        return sum(len(numbers) for numbers in self.lost.values())

    def summary(self) -> str:
        plan = self.plan
        aimed = sum(kill.aimed for kill in self.kills)
        share = 100.0 * self.duplicates / plan.messages if plan.messages else 0.0
        return (
            f"{len(self.kills)} kills ({aimed} aimed between transcript and outbox, "
            f"{self.aimed_hits} of them with an answer waiting there), "
            f"{plan.messages} messages from {len(plan.people)} people, model "
            f"{plan.model_seconds * 1000:.0f} ms, seed {plan.seed}: {self.sent} replies; "
            f"{self.replies_in_window} replies left in a transcript but not the outbox at a "
            f"kill; lost {self.lost_count}; duplicates {self.duplicates} ({share:.2f}%), "
            f"{self.window_duplicates} in the crash window ({self.window_after_aimed} after "
            f"an aimed kill), {len(self.unexplained)} "
            f"unexplained; bad model requests {self.bad_requests}; double answers in "
            f"transcripts {len(self.double_answers)}; given up {self.given_up}; most retries "
            f"of one message {self.max_retries_seen}; preview updates "
            f"{self.preview_updates}, unfinished previews left {self.previews_left}; "
            f"send window p50 {self.window_ms(0.5):.1f} ms, p99 {self.window_ms(0.99):.1f} ms "
            f"over {len(self.windows)} replies ({self.windows_cut} cut by a kill, "
            f"{self.windows_unseen} not seen pending); "
            f"{self.seconds:.0f} s"
        )


def _user_text(message: Any) -> str:
    if not isinstance(message, dict) or message.get("role") != "user":
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


class SlowEcho:
    """The fake model: answers the last message when it is the person's, after about
    `seconds`; answers nothing ("ECHO: ") when it is not, like a model asked to continue its
    own turn, and keeps that request in `bad`. `answers_due` says when the answers being
    computed will leave (for aiming a kill)."""

    def __init__(self, server: FakeAnthropicServer, rng: random.Random, seconds: float) -> None:
        self.server, self.rng, self.seconds = server, rng, seconds
        self.bad: list[dict[str, Any]] = []
        self.answers_due: list[float] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        text = _user_text(messages[-1]) if messages else ""
        if not text.strip():
            self.bad.append(body)
            return self.server.make_text(NOTHING)
        delay = self.rng.uniform(0.7 * self.seconds, 1.3 * self.seconds)
        self.answers_due.append(time.monotonic() + delay)
        reply = self.server.make_text(f"echo: {text}")
        return Reply(reply.status, reply.body, headers=reply.headers, delay=delay)

    async def answer_coming(self, timeout: float, lead: float = 0.05) -> bool:
        """Wait until an answer is being computed that leaves in `lead` seconds or more."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(due - time.monotonic() >= lead for due in self.answers_due):
                return True
            await asyncio.sleep(0.005)
        return False


def _transcripts(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in root.rglob("sessions/*.jsonl")}


def _entries(content: bytes) -> list[dict[str, Any]]:
    entries = []
    for line in content.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def _final_answers(entries: list[dict[str, Any]]) -> dict[str, int]:
    """Per message id, the final answers (assistant entries calling no tool) between it and
    the next person's message: more than one is a second answer to the same message."""
    answers: dict[str, int] = {}
    current: str | None = None
    for entry in entries:
        kind = entry.get("type")
        if kind == "user":
            current = str(entry.get("message_id") or "") or None
            if current is not None:
                answers.setdefault(current, 0)
        elif kind == "dropped":
            current = None
        elif (
            kind == "assistant"
            and not entry.get("tool_calls")
            and current is not None
            and not entry.get("heartbeat")
            and not entry.get("reminder")
        ):
            answers[current] += 1
    return answers


def _pending(db_path: Path) -> set[str]:
    if not db_path.exists():
        return set()
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        rows = connection.execute("SELECT message_id FROM inbox WHERE status = 'pending'")
        return {str(row[0]) for row in rows}
    finally:
        connection.close()


def _nothing_to_do(db_path: Path, tg: FakeTelegramServer) -> bool:
    """Every update fetched, every message answered, every answer sent."""
    if tg.updates or not db_path.exists():
        return False
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        inbox = connection.execute(
            "SELECT count(*) FROM inbox WHERE status = 'pending'"
        ).fetchone()[0]
        outbox = connection.execute(
            "SELECT count(*) FROM outbox WHERE status = 'pending'"
        ).fetchone()[0]
    finally:
        connection.close()
    return inbox == 0 and outbox == 0


def _unrecorded(db_path: Path, tg: FakeTelegramServer) -> set[tuple[str, int]]:
    """Replies in the outbox still pending although the platform has accepted them."""
    if not db_path.exists():
        return set()
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        rows = connection.execute(
            "SELECT chat_id, text FROM outbox WHERE status = 'pending'"
        ).fetchall()
    except sqlite3.OperationalError as exc:  # killed between creating the file and its schema
        if "no such table" not in str(exc):
            raise
        rows = []
    finally:
        connection.close()
    accepted = set(_answered(tg))
    return {
        (str(chat), int(number))
        for chat, text in rows
        for number in TOKEN.findall(str(text))
        if (str(chat), int(number)) in accepted
    }


def _answered(tg: FakeTelegramServer) -> dict[tuple[str, int], list[float]]:
    """(chat, message number) -> when each reply covering it reached the platform (a
    message's latest text; unfinished previews are not replies)."""
    seen: dict[tuple[str, int], list[float]] = {}
    for sent in tg.sent:
        if sent.deleted or is_preview_text(sent.text):
            continue
        for number in set(TOKEN.findall(sent.text)):
            seen.setdefault((sent.chat_id, int(number)), []).append(sent.at)
    return seen


Token = tuple[str, int]  # (chat, message number)


class MarkWatch:
    """When each reply's outbox row stopped being pending, seen from another connection.

    A thread of its own (a read between two awaits of the harness's loop would wait for the
    fake servers' work): it reads `PRAGMA data_version`, which moves when another connection
    commits, every `interval` seconds, and the pending rows when it moved. `marked` holds
    (chat and message number, when seen no longer pending); the time is an upper bound, at
    most one poll late.
    """

    def __init__(self, db_path: Path, interval: float = 0.0005) -> None:
        self.db_path, self.interval = db_path, interval
        self.marked: list[tuple[Token, float]] = []
        self.errors: list[str] = []  # reads that failed (each retried at the next poll)
        self.longest_gap = 0.0  # seconds between two reads that worked: the watch's own lag
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="mark-watch", daemon=True)

    def start(self) -> MarkWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _watch(self) -> None:
        connection: sqlite3.Connection | None = None
        version, pending, last = None, set[Token](), 0.0
        try:
            while not self._stop.wait(self.interval):
                if connection is None:
                    if not self.db_path.exists():
                        continue
                    connection = sqlite3.connect(
                        f"file:{self.db_path}?mode=ro", uri=True, timeout=5, check_same_thread=False
                    )
                try:
                    now_version = connection.execute("PRAGMA data_version").fetchone()[0]
                    seen = time.monotonic()
                    if last:
                        self.longest_gap = max(self.longest_gap, seen - last)
                    last = seen
                    if now_version == version:
                        continue
                    rows = connection.execute(
                        "SELECT chat_id, text FROM outbox WHERE status = 'pending'"
                    ).fetchall()
                except sqlite3.Error as exc:  # not created yet, or busy: the next poll reads it
                    self.errors.append(str(exc))
                    continue
                version = now_version
                current = {
                    (str(chat), int(number))
                    for chat, text in rows
                    for number in TOKEN.findall(str(text))
                }
                self.marked.extend((token, seen) for token in pending - current)
                pending = current
        finally:
            if connection is not None:
                connection.close()

    def windows(self, tg: FakeTelegramServer, kills: list[float]) -> tuple[list[float], int, int]:
        """(send windows in seconds, replies whose window a kill cut, replies never seen
        pending and then marked): for each reply the platform accepted (a new message, not
        an edited preview), until its row was marked."""
        marks: dict[Token, list[float]] = {}
        for token, at in self.marked:
            marks.setdefault(token, []).append(at)
        windows, cut, unseen = [], 0, 0
        for sent in tg.sent:
            if sent.deleted or sent.edits or is_preview_text(sent.text):
                continue
            for number in set(TOKEN.findall(sent.text)):
                later = [at for at in marks.get((sent.chat_id, int(number)), []) if at > sent.at]
                if not later:
                    unseen += 1
                    continue
                marked = min(later)
                if any(sent.at <= kill < marked for kill in kills):
                    cut += 1
                else:
                    windows.append(marked - sent.at)
        return windows, cut, unseen


class _Lock:
    """The state database's write lock, held from this process (another writer)."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.connection: sqlite3.Connection | None = None

    async def take(self, timeout: float = 2.0) -> bool:
        if not self.db_path.exists():
            return False
        deadline = time.monotonic() + timeout
        connection = sqlite3.connect(
            f"file:{self.db_path}?mode=rw", uri=True, timeout=0, isolation_level=None
        )
        while time.monotonic() < deadline:
            try:
                connection.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:  # the gateway is writing: try again
                await asyncio.sleep(0.002)
                continue
            self.connection = connection
            return True
        connection.close()
        return False

    def release(self) -> None:
        if self.connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self.connection.execute("ROLLBACK")
            self.connection.close()
            self.connection = None


async def _answer_appended(root: Path, before: dict[Path, int], timeout: float) -> bool:
    """Wait until some transcript grows by a final answer (its turn then waits for the lock
    to write the outbox row)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in root.rglob("sessions/*.jsonl"):
            size = before.get(path, 0)
            try:
                with open(path, "rb") as handle:
                    handle.seek(size)
                    added = handle.read()
            except OSError:
                continue
            if any(
                e.get("type") == "assistant" and not e.get("tool_calls")
                for e in _entries(added.rpartition(b"\n")[0])
            ):
                return True
        await asyncio.sleep(0.003)
    return False


async def _wait_until(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def run_kill_test(
    tmp_path: Path,
    plan: KillPlan,
    llm: FakeAnthropicServer,
    *,
    progress: Callable[[str], None] | None = None,
) -> KillReport:
    rng = random.Random(plan.seed)
    model = SlowEcho(llm, random.Random(plan.seed + 1), plan.model_seconds)
    llm.responder = model
    llm.stream_delay, llm.stream_chunk_chars = plan.stream_delay, 6
    report = KillReport(plan)
    started = time.monotonic()
    tg = FakeTelegramServer(max_poll=0.3)
    await tg.start()
    env = gateway_env(tmp_path, tg, llm.base_url, plan.people, **dict(plan.extra_env))
    log = tmp_path / "gateway.log"
    root = tmp_path / "workspaces"
    db_path = root / ".gateway" / "state.db"
    expected: dict[str, set[int]] = {}

    numbers = iter(range(plan.messages))

    async def feed(senders: list[tuple[int, float]]) -> None:
        """One message from each (person, gap) in turn, `gap` seconds apart."""
        for person, gap in senders:
            number = next(numbers)
            expected.setdefault(str(person), set()).add(number)
            await tg.send_text(person, f"note M-{number:05d}-X for later")
            await asyncio.sleep(gap)

    feeders: list[asyncio.Task[None]] = []
    snapshots: list[dict[Path, bytes]] = []
    watch = MarkWatch(db_path).start()
    try:
        for number in range(plan.kills):
            # This run's share of the messages, arriving while it starts and works (the
            # seeded generator draws the gaps here, so a run replays whatever the timing).
            share = (
                plan.messages * (number + 1) // plan.kills - plan.messages * number // plan.kills
            )
            feeders.append(
                asyncio.create_task(
                    feed([(rng.choice(plan.people), rng.uniform(*plan.gap)) for _ in range(share)])
                )
            )
            polls = len(tg.offsets_seen)
            process = await start_gateway(env, log)
            draw = rng.random()
            if draw < plan.startup_share:
                await asyncio.sleep(rng.uniform(*plan.startup))
            else:  # from the moment it polls: channels started, pending messages resumed
                await _wait_until(lambda n=polls: len(tg.offsets_seen) > n, timeout=30.0)
                calls = len(llm.requests) + rng.randint(0, plan.max_calls)
                await _wait_until(
                    lambda n=calls: len(llm.requests) >= n or _nothing_to_do(db_path, tg),
                    timeout=30.0,
                )
                await asyncio.sleep(rng.uniform(0, plan.after_call))
            aimed = draw >= 1 - plan.window_share
            lock = _Lock(db_path)
            # Aimed: once a model answer is on its way, hold the write lock so the turn that
            # gets it appends it to the transcript and then waits for its outbox row. Sends
            # are held at the platform meanwhile, and the lock is taken only when every send
            # the platform accepted is recorded, so the lock does not widen the send window.
            if aimed and await model.answer_coming(timeout=4.0):
                tg.sends_open.clear()
                await _wait_until(lambda: not _unrecorded(db_path, tg), timeout=2.0)
                if await lock.take(0.5):
                    sizes = {p: p.stat().st_size for p in root.rglob("sessions/*.jsonl")}
                    report.aimed_hits += await _answer_appended(root, sizes, timeout=2.0)
                else:
                    aimed = False
            else:
                aimed = False
            kill_at = time.monotonic()
            process.send_signal(signal.SIGKILL)
            await process.wait()
            lock.release()
            tg.drop_held_sends()
            report.kills.append(Kill(kill_at, aimed, _unrecorded(db_path, tg)))
            snapshot = _transcripts(root)
            snapshots.append(snapshot)
            pending = _pending(db_path)
            report.replies_in_window += sum(
                1
                for content in snapshot.values()
                for message_id, count in _final_answers(_entries(content)).items()
                if count and message_id in pending
            )
            if progress is not None and (number + 1) % 10 == 0:
                progress(f"{number + 1} kills, {len(tg.sent)} replies so far")
        await asyncio.gather(*feeders)

        process = await start_gateway(env, log)
        try:
            deadline = time.monotonic() + plan.drain_seconds
            while time.monotonic() < deadline:
                answered = _answered(tg)
                if all(
                    (chat, n) in answered for chat, numbers in expected.items() for n in numbers
                ):
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.5)  # let the last deliveries be recorded
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), 40)
    finally:
        watch.stop()
        for feeder in feeders:
            feeder.cancel()
        await tg.stop()
        llm.responder = None

    report.windows, report.windows_cut, report.windows_unseen = watch.windows(
        tg, [kill.at for kill in report.kills]
    )
    report.watch_errors, report.watch_longest_gap = watch.errors, watch.longest_gap
    answered = _answered(tg)
    report.sent = sum(not sent.deleted and not is_preview_text(sent.text) for sent in tg.sent)
    report.previews_left = sum(not sent.deleted and is_preview_text(sent.text) for sent in tg.sent)
    report.preview_updates = len(tg.drafts) + sum(sent.edits for sent in tg.sent)
    report.bad_requests = len(model.bad)
    report.lost = {
        chat: sorted(n for n in numbers if (chat, n) not in answered)
        for chat, numbers in expected.items()
    }
    report.lost = {chat: numbers for chat, numbers in report.lost.items() if numbers}
    in_window: dict[tuple[str, int], int] = {}
    for kill in report.kills:
        for key in kill.unrecorded:
            in_window[key] = in_window.get(key, 0) + 1
        report.window_after_aimed += len(kill.unrecorded) if kill.aimed else 0
    for (chat, number), times in sorted(answered.items()):
        times.sort()
        extra = len(times) - 1
        report.duplicates += extra
        explained = min(extra, in_window.get((chat, number), 0))
        report.window_duplicates += explained
        if extra > explained:
            gaps = [
                f"{times[0] - kill.at:+.3f}" for kill in report.kills if abs(times[0] - kill.at) < 5
            ]
            report.unexplained.append(
                f"chat {chat} message {number} x{extra - explained} (first copy vs kills: {gaps} s)"
            )
    final = _transcripts(root)
    for snapshot in snapshots:
        for path, content in snapshot.items():
            if not final.get(path, b"").startswith(content):
                report.lines_lost.append(str(path))
    for path, content in final.items():
        for line in content.decode("utf-8").splitlines():
            json.loads(line)  # no torn or corrupt line
        for message_id, count in _final_answers(_entries(content)).items():
            if count > 1:
                report.double_answers.append(f"{path.name}: {message_id} x{count}")
    for path in root.rglob("*.md"):
        path.read_text(encoding="utf-8")
    sqlite = sqlite_module()
    for path in [*root.rglob("*.sqlite"), *root.rglob("*.db")]:
        connection = sqlite.connect(path)
        try:
            assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok", path
            if path.name == "state.db":
                with contextlib.suppress(sqlite.OperationalError):  # before `retries` existed
                    row = connection.execute(
                        "SELECT max(retries), sum(status = 'failed') FROM inbox"
                    ).fetchone()
                    report.max_retries_seen = int(row[0] or 0)
                    report.given_up = int(row[1] or 0)
        finally:
            connection.close()
    report.seconds = time.monotonic() - started
    return report
