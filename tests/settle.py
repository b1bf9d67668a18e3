"""Prove silence by the gateway's own state, not by a sleep.

A test that must show that something was *not* answered used to sleep a fixed time and look:
on a slow machine that passes without testing anything. `settled` waits (bounded) until every
recorded inbound message is finished (answered, refused, waiting for pairing) and no outbound
message is pending. A message is marked finished only after its answer went through the delivery
path, so from then on the gateway sends nothing more unprompted, and what was sent is final.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.stores.state import StateDB

POLL_SECONDS = 0.01


async def settled(state: StateDB, timeout: float = 10.0) -> None:
    """Until nothing is pending in the inbox or the outbox; AssertionError after `timeout`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while await state.inbox.pending_inbound() or await state.outbox.pending_outbound():
        if loop.time() > end:
            raise AssertionError(f"the gateway did not settle within {timeout} s")
        await asyncio.sleep(POLL_SECONDS)


async def until(condition: Callable[[], bool], *, what: str, timeout: float = 30.0) -> None:
    """Until `condition()` holds (polled); AssertionError naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not condition():
        if loop.time() > end:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(POLL_SECONDS)
