"""The terminal channel: a direct chat with the owner's workspace from a shell.

It goes through exactly the path every platform uses (InboundMessage in, OutboundMessage
out), so `clawgate chat` exercises the real gateway. One line is handed over at a time: the
next only once the previous one was answered (a reply sent outside a turn, or the end of the
turn the gateway wraps in `typing`), so answers come out in the order of the input even when a
slash command, which the gateway answers at once, follows a slow turn.

Each line goes through the gateway's inbox like a platform message (`durable`): a line whose
answer was cut short (Ctrl-C while it was thinking, a crash) is answered at the next start.
Its id is unique across runs (this run's start time, then a counter).

Questions with choices (`send_choices`: a command waiting for the owner's approval) are
asked on their own line, numbered; the reading goes on at once (the turn that asked is
waiting for the answer), and the next line that is one of the numbers is the press, handed
over as one (`InboundMessage.press`), never as a message. Any other line is a message as
usual; the question can also be answered by its `/approve CODE` line.

Two modes:
- interactive (a terminal on both ends): prompt_toolkit reads each line, with line editing and
  a history kept in `history_path`; the prompt appears only when the previous line is
  answered; a "thinking" line with the seconds elapsed runs while a turn is in progress; a
  message that arrives on its own (a reminder, a heartbeat alert) is printed above the
  prompt. Keys as in a shell: Ctrl-C clears a half-typed line; on an empty line it says how
  to leave, and a second Ctrl-C (or Ctrl-D) leaves. Ctrl-C while an answer is being written
  stops the chat (the process's signal handling: the line is answered at the next start).
- piped: lines are read on a daemon thread (a blocked `readline` must never keep the process
  alive after the chat ends); no prompt, no indicator, answers on stdout in input order.

With `streaming`, a reply is printed as the model writes it (`TerminalPreview`), and its
final text then only completes the line: the output is the same bytes as without streaming.
Interactive, a tool's progress line takes the place of the "thinking" line, and text the
model takes back (it called a tool after all, or a failed model was replaced by its
fallback) is erased. A pipe cannot take text back: there, the rare answer restarted after
part of it was printed is printed again in full on a new line, and progress lines are not
printed at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import shutil
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from channels.base import (
    ChannelBase,
    Choice,
    InboundMessage,
    MessageHandler,
    OutboundMessage,
)
from channels.preview import Preview

log = logging.getLogger(__name__)

CHANNEL_NAME = "terminal"
LOCAL_CHAT = "local"
PROMPT = "you> "
# A line that started neither a turn nor got an answer within this time does not hold up the
# next one (a message the gateway dropped): the chat must never wedge.
ANSWER_WAIT_SECONDS = 15.0
SPINNER = "|/-\\"
LEAVE_HINT = "(Ctrl-C again or Ctrl-D to leave the chat)"
REPLY_PREFIX = "assistant> "
STREAM_INTERVAL = 0.05  # seconds between two prints of a streamed reply: as it comes


class TerminalPreview:
    """A reply printed as it is written; the final text completes it (`finish`)."""

    interval = STREAM_INTERVAL

    def __init__(self, channel: TerminalChannel, message_id: str) -> None:
        self._channel = channel
        self.message_id = message_id
        self.printed = ""  # the reply's text on the screen so far (after the prefix)

    async def show(self, text: str, progress: str = "") -> None:
        channel = self._channel
        if not text:
            if progress and channel.interactive:
                self.erase()
                channel.spinner_label = progress
                await channel.start_spinner()
            return
        await channel.stop_spinner()
        if not text.startswith(self.printed):
            if not channel.interactive:
                return  # a pipe cannot take text back: the final text comes in full
            self.erase()
        if not self.printed:
            channel.write(REPLY_PREFIX)
        channel.write(text[len(self.printed) :])
        self.printed = text

    def erase(self) -> None:
        """Take the printed text back (interactive): up to where the prefix began."""
        if not self.printed:
            return
        width = max(1, shutil.get_terminal_size().columns)
        rows = sum(
            max(1, -(-len(line) // width)) for line in (REPLY_PREFIX + self.printed).split("\n")
        )
        self._channel.write("\r\x1b[K" + "\x1b[1A\x1b[K" * (rows - 1))
        self.printed = ""

    async def delete(self) -> None:
        """No reply follows: take the printed text back (interactive), or end its line (a
        pipe cannot take text back)."""
        if self._channel.interactive:
            self.erase()
        elif self.printed:
            self._channel.write("\n")
            self.printed = ""
        self._channel.forget_preview(self.message_id)

    def finish(self, text: str) -> str:
        """What is left to print of the final `text` (with the newline that ends it)."""
        if self.printed and text.startswith(self.printed):
            return text[len(self.printed) :] + "\n"
        if self.printed and self._channel.interactive:
            self.erase()
        elif self.printed:
            return f"\n{REPLY_PREFIX}{text}\n"
        return f"{REPLY_PREFIX}{text}\n"


class TerminalChannel(ChannelBase):
    name = CHANNEL_NAME
    durable = True  # lines wait in the inbox until answered (see the module doc)
    ready = True
    ready_detail = "started"

    def __init__(
        self,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        sender_id: str = "local",
        prompt: str | None = None,
        interactive: bool | None = None,
        history_path: Path | None = None,
        answer_wait: float = ANSWER_WAIT_SECONDS,
        streaming: bool = False,
    ) -> None:
        self.streaming = streaming
        self._previews: dict[str, TerminalPreview] = {}
        self._preview_ids = itertools.count(1)
        self.spinner_label = "thinking..."
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._sender_id = sender_id
        if interactive is None:
            interactive = _isatty(self._stdin) and _isatty(self._stdout)
        self.interactive = interactive
        self._prompt = prompt if prompt is not None else (PROMPT if interactive else "")
        self._history_path = history_path
        self._answer_wait = answer_wait
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self.input_closed = asyncio.Event()
        self._run_id = f"{time.time_ns():x}"
        self._counter = 0
        # The line in flight: set once it is answered. Turns in progress (typing depth).
        self._answered: asyncio.Event | None = None
        self._turns = 0
        self._spinner: asyncio.Task[None] | None = None
        self._spinner_shown = False
        self._session: Any = None  # the prompt_toolkit PromptSession (interactive)
        self._leave_armed = False  # Ctrl-C on an empty line once: the next one leaves
        self._closing = False
        self._output_lost = False  # the output's reader went away: the chat is over
        # The question whose numbered choices the next line may answer: (its id, choices).
        self._question: tuple[str, list[Choice]] | None = None
        self._question_ids = itertools.count(1)

    # -- the Channel interface ----------------------------------------------------------------

    async def start(self, handler: MessageHandler) -> None:
        if self.interactive:
            source = self._prompted_lines()
        else:
            loop = asyncio.get_running_loop()
            thread = threading.Thread(target=self._read_lines, args=(loop,), daemon=True)
            thread.start()
            source = self._queued_lines()
        self._reader = asyncio.create_task(self._dispatch(handler, source), name="terminal-reader")

    async def stop(self) -> None:
        self._closing = True
        await self._stop_spinner()
        # A prompt being edited is ended like Ctrl-D: prompt_toolkit gives the terminal back
        # that way (cancelling it mid-prompt can leave it hanging).
        app = self._session.app if self._session is not None else None
        if app is not None and app.is_running:
            with contextlib.suppress(Exception):
                app.exit(exception=EOFError())
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait({self._reader}, timeout=2.0)
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def send(self, message: OutboundMessage) -> None:
        await self._stop_spinner()  # the answer is here; what follows in the turn is quick
        live = self._previews.pop(message.replaces, None) if message.replaces else None
        if live is not None:
            await self._print(live.finish(message.text))
        else:
            await self._print(f"{REPLY_PREFIX}{message.text}\n")
        if self._turns == 0:
            self._mark_answered()
        if self._output_lost:  # not shown: it stays in the outbox for the next start
            raise ConnectionResetError("the terminal chat's output is closed")

    def preview(
        self, chat_id: str, *, direct: bool, key: str, message_id: str = ""
    ) -> Preview | None:
        """Printing as it comes. A preview of an earlier run (`message_id`) is not on this
        screen: the reply starts afresh."""
        if not self.streaming:
            return None
        preview = TerminalPreview(self, f"{self._run_id}-p{next(self._preview_ids)}")
        self._previews = {preview.message_id: preview}  # one reply is written at a time
        return preview

    def write(self, text: str) -> None:
        self._write(text)

    # -- questions with choices ----------------------------------------------------------------

    buttons = True

    async def send_choices(self, chat_id: str, text: str, choices: Sequence[Choice]) -> str:
        """Print the question and its numbered choices on their own lines; the next line
        typed that is a number answers it. Reading goes on at once."""
        await self._stop_spinner()
        question_id = f"{self._run_id}-q{next(self._question_ids)}"
        self._question = (question_id, list(choices))
        numbered = "   ".join(f"[{n}] {c.label}" for n, c in enumerate(choices, 1))
        await self._print(f"{REPLY_PREFIX}{text}\n{numbered}   (type the number)\n")
        self._mark_answered()  # the line in flight waits for this answer: read it
        return question_id

    async def answer_press(self, press: InboundMessage, answer: str, shown: str) -> None:
        await self._print(f"{REPLY_PREFIX}{answer}\n")
        if self._turns == 0:  # no turn waited for it: the answer is all there is
            self._mark_answered()

    async def settle_choices(self, chat_id: str, message_id: str, shown: str) -> None:
        if self._question is not None and self._question[0] == message_id:
            self._question = None
            await self._print(f"{REPLY_PREFIX}{shown}\n")

    def _as_press(self, line: str) -> InboundMessage | None:
        """The line as the answer to the open question, when it is one of its numbers."""
        question = self._question
        text = line.strip()
        if question is None or not text.isdigit():
            return None
        question_id, choices = question
        if not 1 <= int(text) <= len(choices):
            return None
        self._question = None
        self._counter += 1
        return InboundMessage(
            channel=CHANNEL_NAME,
            chat_id=LOCAL_CHAT,
            sender_id=self._sender_id,
            text="",
            press=choices[int(text) - 1].data,
            press_id=f"{self._run_id}-{self._counter}",
            press_message=question_id,
        )

    def forget_preview(self, message_id: str) -> None:
        self._previews.pop(message_id, None)

    async def start_spinner(self) -> None:
        if self.interactive and self._spinner is None:
            self._spinner = asyncio.create_task(self._spin(), name="terminal-thinking")

    async def stop_spinner(self) -> None:
        await self._stop_spinner()

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str) -> AsyncIterator[None]:
        """A turn is running: show "thinking" (interactive), and the line is answered when
        it ends (its reply is sent inside)."""
        self._turns += 1
        if self.interactive and self._spinner is None:
            self._spinner = asyncio.create_task(self._spin(), name="terminal-thinking")
        try:
            yield
        finally:
            self._turns -= 1
            if self._turns == 0:
                await self._stop_spinner()
                self._mark_answered()

    # -- reading ------------------------------------------------------------------------------

    async def _dispatch(self, handler: MessageHandler, lines: AsyncIterator[str]) -> None:
        try:
            async for line in lines:
                if self._closing:
                    break
                if not line.strip():
                    continue
                press = self._as_press(line)
                if press is not None:  # decided at once; the turn waiting for it goes on
                    self._answered = asyncio.Event()
                    await handler(press)
                    with self._no_echo():
                        await self._wait_answered(self._answered)
                    continue
                self._counter += 1
                self._answered = asyncio.Event()
                await handler(
                    InboundMessage(
                        channel=CHANNEL_NAME,
                        chat_id=LOCAL_CHAT,
                        sender_id=self._sender_id,
                        text=line,
                        message_id=f"{self._run_id}-{self._counter}",
                    )
                )
                with self._no_echo():  # type-ahead waits unseen for the next prompt
                    await self._wait_answered(self._answered)
        finally:
            self.input_closed.set()

    async def _wait_answered(self, answered: asyncio.Event) -> None:
        while True:
            try:
                await asyncio.wait_for(answered.wait(), self._answer_wait)
                return
            except TimeoutError:
                if self._turns == 0:  # no turn started and nothing came back: go on
                    log.info("terminal: no answer to line %d yet; reading on", self._counter)
                    return

    @contextlib.contextmanager
    def _no_echo(self) -> Iterator[None]:
        """While an answer is awaited, keys typed ahead are not echoed into the "thinking"
        line; they stay buffered and appear at the next prompt.

        Canonical mode is off too: in it the terminal driver itself would take a Ctrl-D typed
        ahead as end of input and hand the prompt a NUL byte instead, so "leave after this
        answer" would be lost. Ctrl-C still raises SIGINT (ISIG stays on)."""
        if not self.interactive:
            yield
            return
        try:
            import termios

            fd = self._stdin.fileno()
            saved = termios.tcgetattr(fd)
            quiet = list(saved)
            quiet[3] &= ~(termios.ECHO | termios.ICANON)
            termios.tcsetattr(fd, termios.TCSANOW, quiet)
        except (ImportError, OSError, ValueError, AttributeError):
            yield
            return
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                termios.tcsetattr(fd, termios.TCSANOW, saved)

    def _mark_answered(self) -> None:
        if self._answered is not None:
            self._answered.set()

    async def _queued_lines(self) -> AsyncIterator[str]:
        while (line := await self._lines.get()) is not None:
            yield line

    def _read_lines(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            for line in self._stdin:
                loop.call_soon_threadsafe(self._lines.put_nowait, line.rstrip("\r\n"))
            loop.call_soon_threadsafe(self._lines.put_nowait, None)
        except (RuntimeError, ValueError, OSError):
            pass  # the loop or the stream closed under us: the chat is over either way

    async def _prompted_lines(self) -> AsyncIterator[str]:
        """Lines from prompt_toolkit: editing, history; keys as in a shell (`_shell_keys`).

        Leaving at the prompt (Ctrl-D, or Ctrl-C twice on an empty line) ends the input like
        the end of a pipe: the chat stops cleanly (exit status 0).
        """
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, History, InMemoryHistory

        history: History = InMemoryHistory()
        if self._history_path is not None:
            with contextlib.suppress(OSError):
                self._history_path.parent.mkdir(parents=True, exist_ok=True)
                self._history_path.touch(mode=0o600, exist_ok=True)
                history = FileHistory(str(self._history_path))
        session: PromptSession[str] = PromptSession(
            history=history, key_bindings=self._shell_keys()
        )
        session.default_buffer.on_text_changed += self._typed
        self._session = session
        while not self._closing:
            try:
                # handle_sigint=False: prompt_toolkit would otherwise replace the process's
                # SIGINT handler and remove it afterwards (Ctrl-C while thinking, later).
                yield await session.prompt_async(self._prompt, handle_sigint=False)
            except EOFError:
                return

    def _shell_keys(self) -> Any:
        """Ctrl-C at the prompt: a half-typed line is cleared; on an empty line the first
        press says how to leave and a second one in a row leaves (as Ctrl-D does)."""
        from prompt_toolkit.key_binding import KeyBindings

        keys = KeyBindings()

        @keys.add("c-c")
        def _interrupt(event: Any) -> None:
            buffer = event.app.current_buffer
            if buffer.text:
                buffer.reset()  # the line is dropped, the prompt stays: a shell's Ctrl-C
                self._leave_armed = False
            elif self._leave_armed:
                event.app.exit(exception=EOFError())
            else:
                self._leave_armed = True
                self._write_above(event.app, LEAVE_HINT + "\n")

        return keys

    def _typed(self, _buffer: object) -> None:
        self._leave_armed = False  # typing in between: the next Ctrl-C is a first one again

    # -- writing ------------------------------------------------------------------------------

    async def notice(self, text: str) -> None:
        """A line from the gateway itself (where its web panel is), above the prompt."""
        await self._print(text + "\n")

    async def _print(self, text: str) -> None:
        """Write a message: above the prompt if one is being edited, else plainly.

        Above the prompt, the prompt is erased, the text written and the prompt drawn again,
        all without leaving raw mode. prompt_toolkit's `run_in_terminal` switches to cooked
        mode for the write, and a Ctrl-D pressed in that moment would be taken by the terminal
        driver as end of input and never reach the prompt: the chat would not leave."""
        if self.interactive:
            from prompt_toolkit.application import get_app_or_none

            app = get_app_or_none()
            if app is not None and app.is_running:
                self._write_above(app, text)
                return
        self._write(text)

    def _write_above(self, app: Any, text: str) -> None:
        app.renderer.erase()  # the prompt goes; the cursor is where it began
        self._write(text)
        app.renderer.request_absolute_cursor_position()
        app.invalidate()  # the prompt is drawn again below the text

    def _write(self, text: str) -> None:
        if self._spinner_shown:
            self._put("\r\x1b[K")
            self._spinner_shown = False
        self._put(text)

    def _put(self, text: str) -> None:
        """Every write to the chat's output: one that fails, or finds the output closed (its
        reader went away: `clawgate chat | head -1`, a hung-up terminal), ends the chat
        instead of raising into the turn or answering into the void."""
        if self._output_lost:
            return
        try:
            self._stdout.write(text)
            self._stdout.flush()
            lost = self._stdout.closed
        except (OSError, ValueError):
            lost = True
        if lost:
            self._lose_output()

    def _lose_output(self) -> None:
        self._output_lost = True
        log.warning(
            "terminal: the chat's output was closed (its reader went away): the "
            "chat ends; an answer not shown is shown at the next start"
        )
        self._closing = True
        self._mark_answered()  # the line in flight waits for nothing more
        self._lines.put_nowait(None)  # piped: the reading loop ends at once
        app = self._session.app if self._session is not None else None
        if app is not None and app.is_running:
            with contextlib.suppress(Exception):
                app.exit(exception=EOFError())

    async def _spin(self, clock: Callable[[], float] = time.monotonic) -> None:
        started = clock()
        frame = 0
        while True:
            seconds = int(clock() - started)
            self._put(f"\r\x1b[K{SPINNER[frame % len(SPINNER)]} {self.spinner_label} {seconds} s")
            self._spinner_shown = True
            frame += 1
            await asyncio.sleep(0.25)

    async def _stop_spinner(self) -> None:
        self.spinner_label = "thinking..."
        task, self._spinner = self._spinner, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._spinner_shown:
            self._put("\r\x1b[K")
            self._spinner_shown = False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
