"""Stopping a background task of the recall index (its watcher, its embedding queue)."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["stop"]


async def stop(task: asyncio.Task[None] | None) -> None:
    """Cancel `task` and wait until it has ended (None: nothing runs)."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
