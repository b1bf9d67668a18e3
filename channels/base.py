"""The one small interface every platform adapter implements.

Keeping it this small (start, stop, send) is what lets the gateway treat a terminal, Telegram
and Discord alike, and lets tests swap in a recording fake.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

ChatType = Literal["direct", "group"]
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A platform-neutral message from a person, as the gateway sees it."""

    channel: str
    chat_id: str
    sender_id: str
    text: str
    chat_type: ChatType = "direct"
    message_id: str = ""
    sender_name: str = ""
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # In a group: the bot was mentioned or replied to (channels set it; DMs leave it False).
    addressed: bool = False
    # A non-text attachment ("photo", "voice", ...); a caption, if any, is in `text`.
    attachment: str = ""

    def __post_init__(self) -> None:
        # Lone surrogates (from broken UTF-16 on a platform) cannot be written as UTF-8: one
        # would make the transcript append fail. Replace them here, once, for every channel.
        if _SURROGATE.search(self.text):
            object.__setattr__(self, "text", _SURROGATE.sub("\ufffd", self.text))


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """A reply to deliver. Chunking for the platform's limits is the channel's job."""

    channel: str
    chat_id: str
    text: str
    reply_to: str = ""


MessageHandler = Callable[[InboundMessage], Awaitable[None]]


class ChannelError(Exception):
    """A channel cannot run (rejected token, API unreachable at start); `str()` says why."""


class Channel(Protocol):
    """A platform adapter. `start` returns once the adapter is receiving."""

    name: str

    async def start(self, handler: MessageHandler) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: OutboundMessage) -> None: ...


class TypingChannel(Channel, Protocol):
    """Optional: a channel that can show "typing..." for as long as the context is open."""

    def typing(self, chat_id: str) -> AbstractAsyncContextManager[None]: ...


class OffsetStore(Protocol):
    """Where a polling channel keeps its platform offset (the gateway state database)."""

    async def load_offset(self, channel: str) -> int | None: ...

    async def save_offset(self, channel: str, value: int) -> None: ...
