"""Running a `GatewayApp` in the foreground: signals, exit codes, and never hanging.

- First SIGTERM: log "stopping", stop intake, give running turns the grace period
  (`stop_grace_seconds`), then stop every part in reverse order. First Ctrl-C: the same
  without the grace (the person at the keyboard wants it stopped now): a running turn is
  abandoned, its message stays recorded and is answered after the next start. A start-up
  still in progress is cancelled and unwound.
- Second Ctrl-C or SIGTERM: exit at once (status 130). Unanswered messages stay recorded.
- Exit status: 0 after SIGTERM or the end of terminal input, 130 after Ctrl-C (never 0), 2
  when start-up failed for a reason the person can fix (one line naming it), 1 when another
  gateway already runs on the same workspaces ("clawgate is already running (pid N) on ROOT").
- Whatever is left afterwards (a worker thread of a database connection someone forgot to
  close) cannot keep the process alive: it is given a moment, then the process exits anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from gateway.assembly.builder import GatewayApp, Plan, StartupError
from gateway.config.settings import Settings
from gateway.ops.output import DRAIN_SECONDS, drain

log = logging.getLogger("clawgate")

EXIT_INTERRUPTED = 130
LINGER_SECONDS = 1.0  # how long leftover non-daemon threads may delay the exit
STOP_MARGIN_SECONDS = 5.0  # on top of the grace: closing channels, databases, the provider
HARD_EXIT_DRAIN_SECONDS = 0.5  # queued output's moment before an immediate exit


class _Stopper:
    """Turns the first signal into a clean stop and the second into an immediate exit."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.signal_name = ""

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.on_signal, sig)

    def on_signal(self, sig: signal.Signals) -> None:
        """Act first, then say so: the stop (or the exit) is decided before anything is
        written, and what is written cannot fail (gateway/ops/output.py), so a closed
        stderr (`clawgate run | tee`, tee killed by the same Ctrl-C) cannot keep it from
        stopping."""
        if self.event.is_set():
            _hard_exit(
                EXIT_INTERRUPTED,
                "clawgate: stopped at once (unanswered messages are answered after the next start)",
                fresh_line=True,
            )
        self.signal_name = signal.Signals(sig).name
        self.event.set()
        with contextlib.suppress(Exception):
            log.warning("stopping (%s): no new turns", self.signal_name)
            _say(_stopping_line(self.signal_name), fresh_line=True)

    @property
    def exit_code(self) -> int:
        return EXIT_INTERRUPTED if self.signal_name == "SIGINT" else 0


AfterStart = Callable[[GatewayApp], Awaitable[None]]


def run_until_stopped(
    config: Settings,
    plan: Plan,
    *,
    banner: str | None = None,
    until_input_closed: bool = False,
    app: GatewayApp | None = None,
    after_start: AfterStart | None = None,
) -> int:
    """Start the app for `plan`, run until a signal (or the end of terminal input), stop."""
    try:
        code = _run_loop(_run(config, plan, banner, until_input_closed, app, after_start))
    except KeyboardInterrupt:  # a Ctrl-C before the handlers were installed
        code = EXIT_INTERRUPTED
    _exit_if_threads_linger(code)
    return code


def _run_loop(main: Coroutine[Any, Any, int]) -> int:
    """`asyncio.run`, except that the end does not wait for the default executor's threads.

    asyncio.run joins them before it returns, so a worker still busy (the recall index
    embedding a workspace, an SDK import) would hold the exit for as long as it takes: 15 s
    and more on a busy machine after the chat already said goodbye. Here the loop closes
    without waiting; `_exit_if_threads_linger` then gives such threads LINGER_SECONDS. What
    they write is crash-safe by design (SQLite, atomic file writes), as over a kill -9.
    """
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_left_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()  # shuts the default executor down without waiting for it


def _cancel_left_tasks(loop: asyncio.AbstractEventLoop) -> None:
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


async def _run(
    config: Settings,
    plan: Plan,
    banner: str | None,
    until_input_closed: bool,
    app: GatewayApp | None,
    after_start: AfterStart | None,
) -> int:
    stopper = _Stopper()
    stopper.install()
    app = app or GatewayApp(config, plan)
    starting = asyncio.create_task(app.start(), name="gateway-start")
    stop_wait = asyncio.create_task(stopper.event.wait())
    await asyncio.wait({starting, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():  # interrupted during start-up: unwind what started
        # The start may already be answering (it waits for the first answers before the HTTP
        # servers): the unwinding gives those turns the same grace as a stop after the start.
        app.stop_intake(_grace(config, stopper))
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await starting
        return stopper.exit_code
    try:
        starting.result()
    except StartupError as exc:
        stop_wait.cancel()
        _say(f"clawgate: {exc}")
        return exc.exit_code
    if banner:
        _say(banner)
    if after_start is not None:
        await after_start(app)
    waits: set[asyncio.Task[Any]] = {stop_wait}
    if until_input_closed:
        waits.add(asyncio.create_task(_input_done(app)))
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in waits:
        task.cancel()
    stopping = asyncio.create_task(app.stop(_grace(config, stopper)))
    deadline = config.stop_grace_seconds + STOP_MARGIN_SECONDS
    done, _ = await asyncio.wait({stopping}, timeout=deadline)
    if not done:
        log.error("stopping took longer than %.0f s; exiting anyway", deadline)
        _hard_exit(stopper.exit_code or 1)
    stopping.result()
    return stopper.exit_code


def _grace(config: Settings, stopper: _Stopper) -> float:
    """Seconds running turns get: none after Ctrl-C, `stop_grace_seconds` otherwise."""
    return 0.0 if stopper.signal_name == "SIGINT" else config.stop_grace_seconds


async def _input_done(app: GatewayApp) -> None:
    """The terminal's input ended (Ctrl-D, or the end of piped input) and every line was
    answered: the chat is over."""
    terminal = app.parts.channels.get("terminal")
    if terminal is None:
        await asyncio.Event().wait()
    await terminal.input_closed.wait()  # type: ignore[union-attr]
    await app.parts.lanes.drain()


def _exit_if_threads_linger(code: int) -> None:
    deadline = time.monotonic() + LINGER_SECONDS
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [
        t.name
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    if left:
        log.warning("exiting with %d worker thread(s) still alive: %s", len(left), ", ".join(left))
        _hard_exit(code, settle=DRAIN_SECONDS)


def _stopping_line(signal_name: str) -> str:
    """What the first signal does, said as it is (the README's "Stopping" says the same)."""
    if signal_name == "SIGINT":  # no grace: a running turn is left for the next start
        return (
            "clawgate: stopping now (Ctrl-C); a message being answered is answered after "
            "the next start; Ctrl-C again exits without closing cleanly"
        )
    return (
        f"clawgate: stopping ({signal_name}); running turns get stop_grace_seconds to "
        "finish; a second signal stops at once"
    )


def _say(text: str, *, fresh_line: bool = False) -> None:
    """A line on stderr that can never raise (whatever stderr is, or has become). With
    `fresh_line` at a terminal, it starts at the line's beginning, over whatever was there:
    a signal can come while the chat's "thinking... 2 s" line waits without its newline."""
    with contextlib.suppress(Exception):
        start = "\r\x1b[K" if fresh_line and sys.stderr.isatty() else ""
        print(start + text, file=sys.stderr, flush=True)


def _hard_exit(
    code: int,
    last_words: str = "",
    *,
    settle: float = HARD_EXIT_DRAIN_SECONDS,
    fresh_line: bool = False,
) -> None:
    """Exit now; `last_words` and queued output get at most `settle` seconds to go out first
    (a full pipe nobody reads must not hold the exit)."""
    if last_words:
        _say(last_words, fresh_line=fresh_line)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
        drain(settle)
        logging.shutdown()
    os._exit(code)
