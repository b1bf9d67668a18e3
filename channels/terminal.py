"""The terminal channel: a direct chat with the owner's workspace from a shell.

It goes through exactly the path every platform uses (InboundMessage in, OutboundMessage
out), so `clawgate chat` exercises the real gateway.

One line is handed over at a time: the next line is read only once the previous one was
answered (a turn ends when the gateway leaves `typing()`; a command when its answer is sent).
So piped input (`first`, `/status`, `second`) is answered in order, and in a terminal the
prompt appears only when the assistant is ready. In a terminal, lines are edited with
prompt_toolkit (history, arrows) and a "thinking" line shows while a turn runs; without a
terminal, lines are read on a daemon thread (a blocked `readline` must never keep the process
alive after the chat ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import AsyncIterator
from typing import TextIO

from channels.base import ChannelBase, InboundMessage, MessageHandler, OutboundMessage

log = logging.getLogger(__name__)

CHANNEL_NAME = "terminal"
LOCAL_CHAT = "local"
THINKING = "(thinking…)"
IDLE_GIVE_UP_SECONDS = 2.0  # a line that started nothing at all in this time is given up


class TerminalChannel(ChannelBase):
    name = CHANNEL_NAME
    durable = False  # nothing to redeliver after a restart: no inbox, no outbox

    def __init__(
        self,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        sender_id: str = "local",
        prompt: str | None = None,
        line_editing: bool | None = None,
        history_file: str | None = None,
    ) -> None:
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._sender_id = sender_id
        interactive = _isatty(self._stdin) and _isatty(self._stdout)
        self.interactive = interactive
        self._prompt = prompt if prompt is not None else ("you> " if interactive else "")
        self._line_editing = interactive if line_editing is None else line_editing
        self._history_file = history_file
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self.input_closed = asyncio.Event()
        self._counter = 0
        # Answer tracking: the line in flight is answered once something was sent (or a turn
        # ended) and no turn is running.
        self._busy = 0
        self._progress = False
        self._answered = asyncio.Event()
        self._thinking_shown = False

    async def start(self, handler: MessageHandler) -> None:
        if self._line_editing:
            self._reader = asyncio.create_task(self._edit_lines(handler), name="terminal-reader")
            return
        loop = asyncio.get_running_loop()
        thread = threading.Thread(target=self._read_lines, args=(loop,), daemon=True)
        thread.start()
        self._reader = asyncio.create_task(self._dispatch(handler), name="terminal-reader")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def send(self, message: OutboundMessage) -> None:
        self._clear_thinking()
        self._stdout.write(f"assistant> {message.text}\n")
        self._stdout.flush()
        self._progress = True
        self._maybe_answered()

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str) -> AsyncIterator[None]:
        """The gateway runs a turn inside this: a "thinking" line in a terminal."""
        self._busy += 1
        if self.interactive and not self._thinking_shown:
            self._stdout.write(THINKING)
            self._stdout.flush()
            self._thinking_shown = True
        try:
            yield
        finally:
            self._busy -= 1
            self._clear_thinking()
            self._progress = True
            self._maybe_answered()

    def _clear_thinking(self) -> None:
        if self._thinking_shown:
            self._stdout.write("\r\033[K")
            self._stdout.flush()
            self._thinking_shown = False

    def _maybe_answered(self) -> None:
        if self._progress and self._busy == 0:
            self._answered.set()

    # --- reading ------------------------------------------------------------------------

    def _read_lines(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            for line in self._stdin:
                loop.call_soon_threadsafe(self._lines.put_nowait, line.rstrip("\r\n"))
            loop.call_soon_threadsafe(self._lines.put_nowait, None)
        except (RuntimeError, ValueError, OSError):
            pass  # the loop or the stream closed under us: the chat is over either way

    async def _dispatch(self, handler: MessageHandler) -> None:
        self._show_prompt()
        while (line := await self._lines.get()) is not None:
            await self._hand_over(handler, line)
            self._show_prompt()
        self.input_closed.set()

    async def _edit_lines(self, handler: MessageHandler) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        history = FileHistory(self._history_file) if self._history_file else InMemoryHistory()
        session: PromptSession[str] = PromptSession(history=history)
        try:
            while True:
                try:
                    # handle_sigint=False: clawgate's own SIGINT handler stays installed.
                    line = await session.prompt_async(self._prompt, handle_sigint=False)
                except KeyboardInterrupt:
                    # At the prompt the terminal is in raw mode, so Ctrl-C arrives as a key,
                    # not a signal: raise the signal, so it stops clawgate the one way
                    # Ctrl-C always does (exit status 130).
                    signal.raise_signal(signal.SIGINT)
                    await asyncio.Event().wait()
                except EOFError:
                    log.debug("terminal input ended")
                    break
                await self._hand_over(handler, line)
        finally:
            self.input_closed.set()

    async def _hand_over(self, handler: MessageHandler, line: str) -> None:
        """Give one line to the gateway and wait until it was answered."""
        if not line.strip():
            return
        self._counter += 1
        self._progress = False
        self._answered.clear()
        await handler(
            InboundMessage(
                channel=CHANNEL_NAME,
                chat_id=LOCAL_CHAT,
                sender_id=self._sender_id,
                text=line,
                message_id=str(self._counter),
            )
        )
        # Something always happens for a line (a reply, a turn); should nothing happen at all
        # (the gateway failed to queue it and logged why), do not wait forever.
        while not self._answered.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._answered.wait(), IDLE_GIVE_UP_SECONDS)
            if not self._answered.is_set() and self._busy == 0 and not self._progress:
                return

    def _show_prompt(self) -> None:
        if self._prompt:
            self._stdout.write(self._prompt)
            self._stdout.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, AttributeError):
        return False
