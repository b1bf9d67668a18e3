"""Button presses and the typed answers that stand in for them: the pipeline's side.

A channel with buttons hands a press to the gateway as an `InboundMessage` with `press` set
(channels/base.py). The gateway does not record it as a message, route it to a session or
show it to a model: it gives it to whoever registered for presses (`Gateway.use_presses`:
the exec approvals, gateway/features/exec/desk.py), at once, outside every lane, since the
turn that asked may be waiting for exactly this. `/approve` and `/deny` (`ANSWERS`) are the
same answers typed, for channels without buttons; they too are answered at once.
"""

from __future__ import annotations

from typing import Protocol

from channels.base import InboundMessage

__all__ = ["ANSWERS", "Presses"]

ANSWERS = frozenset({"approve", "deny"})


class Presses(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def pressed(self, msg: InboundMessage) -> None: ...

    async def typed(self, channel: str, sender_id: str, name: str, args: str) -> str: ...
