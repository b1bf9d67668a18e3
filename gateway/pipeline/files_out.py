"""Files out: the send_file tool's way into the one delivery path.

`ChatOutbox` is bound to the chat a turn answers. It queues the file in the outbox like any
reply (durable, retried, in order with the chat's other messages, so a file comes before the
answer that mentions it), keyed by the message answered, the file's path and its content: a
turn repeated after a restart sends the same file once, a changed file again.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from gateway.agent.tools.base import ToolError
from gateway.pipeline.delivery import Delivery
from gateway.pipeline.routing import Route

# How long the tool waits for the platform to take the file before reporting it as on its way.
FIRST_TRY_SECONDS = 60.0


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:16]


class ChatOutbox:
    def __init__(self, delivery: Delivery, route: Route, *, max_bytes: int, durable: bool) -> None:
        self.delivery = delivery
        self.route = route
        self.channel = route.channel
        self.chat_id = route.chat_id
        self.message_id = route.message_id
        self.max_bytes = max_bytes
        self.durable = durable and bool(route.message_id)

    async def send_file(self, path: Path, caption: str) -> str:
        route = self.route
        key = None
        if self.durable:
            rel = path.relative_to(Path(route.workspace).resolve()).as_posix()
            digest = await asyncio.to_thread(_digest, path)
            key = f"file:{route.channel}:{route.chat_id}:{route.message_id}:{rel}:{digest}"
        first = await self.delivery.deliver(
            route.channel, route.chat_id, caption, key=key, file=str(path)
        )
        try:
            outcome = await asyncio.wait_for(asyncio.shield(first), FIRST_TRY_SECONDS)
        except TimeoutError:
            return "still uploading; it will arrive before your answer"
        if outcome == "refused":
            raise ToolError(
                f"send_file: {route.channel} refused the file (see the log); tell "
                "the person where it is in the workspace instead"
            )
        return {
            "sent": "sent to the person",
            "queued": "queued: the platform did not take it yet, it is retried until sent",
            "duplicate": "already sent for this message earlier; not sent twice",
        }.get(outcome, f"not sent ({outcome})")
