"""Standard output and error that can never stop, kill or block the process.

Why: `clawgate run 2>&1 | tee run.log`, then Ctrl-C. tee dies of the same Ctrl-C, and the
next write to stderr raised BrokenPipeError: inside the signal handler, before it started the
stop, so the gateway ignored every further Ctrl-C and SIGTERM until kill -9. The same write
can come from anywhere (the banner, a notice, a log line, the terminal chat's answer, a Rich
table, `typer.echo`), and a reader that stops reading without going away (a paused `docker
logs`, a stuck journal) fills the pipe, where a write blocks the thread that makes it: the
event loop, for good.

So `safe_output()` (around every command, gateway/cli/main.py) replaces `sys.stdout` and
`sys.stderr` with `SafeOutput` streams:
- A write never raises. Once the descriptor's reader is gone (EPIPE, EIO, a closed
  descriptor; for a pipe or socket, poll says so before the write) the stream reports
  `closed` and drops what follows: the terminal chat reads that as the end of its chat; a
  gateway serves on (a journal restarting or a `docker logs` ending must not take the
  assistant down).
- To a pipe or a socket, text is queued (at most `QUEUE_BYTES`) and written by one daemon
  thread, in the order written across both streams (`2>&1` stays in order): a full pipe
  blocks that thread, never the caller. What does not fit is dropped, and a line in its place
  says how much once the reader reads again.
- To a terminal or a file, text is written at once (there the reader is the person, or the
  disk), with the same rule for errors.
- Text goes to the descriptor with `os.write`, never through Python's buffered
  `sys.__stdout__`, so Python's own flush at exit has nothing left to write and cannot fail
  (no "Exception ignored ... BrokenPipeError", no exit status 120).
- `drain(seconds)` lets queued text out before the process ends, bounded: the end of
  `safe_output()` and an immediate exit (gateway/cli/lifecycle.py) call it.

A stream without a descriptor (a test's capture) is wrapped only so that its errors cannot
escape.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import TextIO

QUEUE_BYTES = 1 << 20  # text held for a reader that is not reading; beyond it, dropped
DRAIN_SECONDS = 2.0  # how long the end of a command waits for queued text to go out
WRITE_ERRORS = (OSError, ValueError)  # a closed or broken descriptor, a closed stream


class SafeOutput(io.TextIOBase):
    """A text stream whose writes never raise and never block for long (see module doc)."""

    def __init__(
        self, inner: TextIO, fd: int | None = None, *, writer: _Writer | None = None
    ) -> None:
        """`fd`: the descriptor under `inner`, written directly (None: write through `inner`,
        guarded; `guarded()` passes it for the process's own stdout and stderr only)."""
        super().__init__()
        self.inner = inner
        self._encoding = getattr(inner, "encoding", None) or "utf-8"
        self._fd = fd
        self._tty = self._fd is not None and os.isatty(self._fd)
        self._queued = self._fd is not None and _is_pipe_or_socket(self._fd)
        self._writer = writer or WRITER
        self._gone = False
        if self._fd is not None:
            with contextlib.suppress(*WRITE_ERRORS):
                inner.flush()  # what Python buffered before comes first

    # -- the stream ---------------------------------------------------------------------------

    def write(self, text: str) -> int:
        if self._gone or not text:
            return len(text)
        if self._fd is None:
            self._write_through(text)
            return len(text)
        data = text.encode(self._encoding, "backslashreplace")
        if self._queued:
            if _reader_gone(self._fd):  # seen now, not once the thread writes: `closed`
                self._gone = True  # is true for the caller that just wrote
                return len(text)
            self._writer.put(self, data)
        else:
            self.write_now(data)  # a terminal or a file: at once
        return len(text)

    def flush(self) -> None:
        """Nothing waits in here: queued text is on its way (`drain` waits for it)."""
        if self._fd is None and not self._gone:
            try:
                self.inner.flush()
            except WRITE_ERRORS:
                self._gone = True

    @property
    def closed(self) -> bool:
        """True once the reader is gone: what is written from then on is dropped."""
        return self._gone

    def close(self) -> None:
        """The descriptor belongs to the process, not to this stream: nothing to close."""

    def fileno(self) -> int:
        if self._fd is None:
            return self.inner.fileno()
        return self._fd

    def isatty(self) -> bool:
        if self._fd is None:
            try:
                return self.inner.isatty()
            except WRITE_ERRORS:
                return False
        return self._tty

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "backslashreplace"

    # -- writing ------------------------------------------------------------------------------

    def write_now(self, data: bytes | bytearray, *, wait: bool = False) -> None:
        """Write all of `data` to the descriptor (the writer thread, or a terminal or a
        file); a reader gone marks the stream closed. A descriptor someone made non-blocking
        and full is waited for by the writer thread (`wait`); anyone else drops the text."""
        fd = self._fd
        if fd is None:
            return
        view = memoryview(data)
        while view and not self._gone:
            try:
                view = view[os.write(fd, view) :]
            except InterruptedError:
                continue
            except BlockingIOError:
                if not wait:
                    return
                with contextlib.suppress(*WRITE_ERRORS):
                    select.select([], [fd], [fd])
            except WRITE_ERRORS:
                self._gone = True

    def _write_through(self, text: str) -> None:
        try:
            self.inner.write(text)
        except WRITE_ERRORS:
            self._gone = True


class _Gap:
    """A place in the queue where text was dropped (the queue was full), and how much."""

    def __init__(self, count: int) -> None:
        self.count = count

    def note(self) -> bytes:
        return (
            f"clawgate: {self.count} bytes of output dropped here: nobody was reading them\n"
        ).encode()


class _Writer:
    """One daemon thread writing queued text to its streams, in the order it was written."""

    def __init__(self, limit: int = QUEUE_BYTES) -> None:
        self.limit = limit
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a fork child gets its own thread

    def _reset(self) -> None:
        self._changed = threading.Condition()
        self._queue: deque[tuple[SafeOutput, bytes | _Gap]] = deque()
        self._bytes = 0  # queued or being written
        self._writing = False
        self._thread: threading.Thread | None = None

    def put(self, stream: SafeOutput, data: bytes) -> None:
        """Queue `data` for `stream`, or mark it dropped when the queue is full (never
        waits): the note says so where the text would have been."""
        with self._changed:
            if self._bytes + len(data) > self.limit:
                last = self._queue[-1] if self._queue else None
                if last is not None and last[0] is stream and isinstance(last[1], _Gap):
                    last[1].count += len(data)
                else:
                    self._queue.append((stream, _Gap(len(data))))
                return
            self._queue.append((stream, data))
            self._bytes += len(data)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="clawgate-output", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def drain(self, seconds: float) -> bool:
        """Wait until everything queued was written (or its reader is gone), at most
        `seconds`; whether it was."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while self._queue or self._writing:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._queue:
                    self._changed.wait()
                stream, item = self._queue.popleft()
                data = bytearray(item.note() if isinstance(item, _Gap) else item)
                counted = 0 if isinstance(item, _Gap) else len(item)
                while self._queue and self._queue[0][0] is stream:  # one write, not many
                    more = self._queue[0][1]
                    if isinstance(more, _Gap):
                        break
                    self._queue.popleft()
                    data += more
                    counted += len(more)
                self._writing = True
            try:
                stream.write_now(data, wait=True)
            finally:
                with self._changed:
                    self._bytes -= counted
                    self._writing = False
                    self._changed.notify_all()


WRITER = _Writer()


def drain(seconds: float = DRAIN_SECONDS) -> bool:
    """Let queued output out before the process ends, waiting at most `seconds`."""
    return WRITER.drain(seconds)


def guarded(stream: TextIO | None) -> TextIO | None:
    """`stream` as a `SafeOutput` (itself if it already is one; None stays None)."""
    if stream is None or isinstance(stream, SafeOutput):
        return stream
    own = stream in (sys.__stdout__, sys.__stderr__)  # not a wrapper that must see the text
    return SafeOutput(stream, _descriptor(stream) if own else None)  # type: ignore[return-value]


@contextlib.contextmanager
def safe_output() -> Iterator[None]:
    """`sys.stdout` and `sys.stderr` are `SafeOutput` streams inside; at the end, queued
    output gets `DRAIN_SECONDS` to go out and the streams are put back."""
    saved = sys.stdout, sys.stderr
    sys.stdout = guarded(sys.stdout)
    sys.stderr = guarded(sys.stderr)
    try:
        yield
    finally:
        drain()
        sys.stdout, sys.stderr = saved


def _descriptor(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None


def _reader_gone(fd: int) -> bool:
    """Whether the other end of a pipe or socket is closed (poll reports an error or a
    hang-up on the writing end), without writing and without waiting."""
    poller = select.poll()  # one per call: a poll object is not for concurrent threads
    poller.register(fd, select.POLLOUT)
    try:
        events = poller.poll(0)
    except OSError:
        return False
    return any(mask & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, mask in events)


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
