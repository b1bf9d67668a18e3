"""The terminal channel: a direct chat with the owner's workspace from a shell.

It goes through exactly the path every platform uses (InboundMessage in, OutboundMessage
out), so `clawgate chat` exercises the real gateway. Lines are read on a daemon thread: a
blocked `readline` must never keep the process alive after the chat ends.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TextIO

from channels.base import ChannelBase, InboundMessage, MessageHandler, OutboundMessage

CHANNEL_NAME = "terminal"
LOCAL_CHAT = "local"


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
    ) -> None:
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._sender_id = sender_id
        interactive = self._stdin.isatty() and self._stdout.isatty()
        self._prompt = prompt if prompt is not None else ("you> " if interactive else "")
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self.input_closed = asyncio.Event()
        self._counter = 0

    async def start(self, handler: MessageHandler) -> None:
        loop = asyncio.get_running_loop()
        thread = threading.Thread(target=self._read_lines, args=(loop,), daemon=True)
        thread.start()
        self._reader = asyncio.create_task(self._dispatch(handler), name="terminal-reader")
        self._show_prompt()

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def send(self, message: OutboundMessage) -> None:
        self._stdout.write(f"\nassistant> {message.text}\n" if self._prompt else
                           f"assistant> {message.text}\n")
        self._show_prompt()

    def _show_prompt(self) -> None:
        if self._prompt:
            self._stdout.write(self._prompt)
        self._stdout.flush()

    def _read_lines(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            for line in self._stdin:
                loop.call_soon_threadsafe(self._lines.put_nowait, line.rstrip("\r\n"))
            loop.call_soon_threadsafe(self._lines.put_nowait, None)
        except (RuntimeError, ValueError, OSError):
            pass  # the loop or the stream closed under us: the chat is over either way

    async def _dispatch(self, handler: MessageHandler) -> None:
        while (line := await self._lines.get()) is not None:
            if not line.strip():
                self._show_prompt()
                continue
            self._counter += 1
            await handler(
                InboundMessage(
                    channel=CHANNEL_NAME,
                    chat_id=LOCAL_CHAT,
                    sender_id=self._sender_id,
                    text=line,
                    message_id=str(self._counter),
                )
            )
        self.input_closed.set()
