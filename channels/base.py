"""The one small interface every platform adapter implements.

Keeping it this small (start, stop, send) is what lets the gateway treat a terminal, Telegram
and Discord alike, and lets tests swap in a recording fake.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

ChatType = Literal["direct", "group"]


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


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """A reply to deliver. Chunking for the platform's limits is the channel's job."""

    channel: str
    chat_id: str
    text: str
    reply_to: str = ""


MessageHandler = Callable[[InboundMessage], Awaitable[None]]


class Channel(Protocol):
    """A platform adapter. `start` returns once the adapter is receiving."""

    name: str

    async def start(self, handler: MessageHandler) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: OutboundMessage) -> None: ...
