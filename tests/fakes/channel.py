"""A recording channel: inject inbound messages, collect what the gateway sends."""

from __future__ import annotations

import asyncio
import itertools

from channels.base import ChannelBase, ChatType, InboundMessage, MessageHandler, OutboundMessage


class RecordingChannel(ChannelBase):
    def __init__(self, name: str = "fakechat") -> None:
        self.name = name
        self.sent: list[OutboundMessage] = []
        self._handler: MessageHandler | None = None
        self._changed = asyncio.Condition()
        self._ids = itertools.count(1)
        self.started = False

    async def start(self, handler: MessageHandler) -> None:
        self._handler = handler
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def send(self, message: OutboundMessage) -> None:
        async with self._changed:
            self.sent.append(message)
            self._changed.notify_all()

    async def inject(
        self,
        sender: str,
        text: str,
        *,
        chat_type: ChatType = "direct",
        chat_id: str = "",
        sender_name: str = "",
    ) -> None:
        assert self._handler is not None, "channel not started"
        await self._handler(
            InboundMessage(
                channel=self.name,
                chat_id=chat_id or sender,
                sender_id=sender,
                text=text,
                chat_type=chat_type,
                sender_name=sender_name,
                # Unique across instances, like a platform's ids (the gateway dedupes on them).
                message_id=f"{id(self):x}-{next(self._ids)}",
            )
        )

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [m.text for m in self.sent if chat_id is None or m.chat_id == chat_id]

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[OutboundMessage]:
        """Wait until at least `count` messages were sent in total."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self.sent) >= count), timeout)
        return list(self.sent)
