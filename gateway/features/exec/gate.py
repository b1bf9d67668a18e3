"""The sandbox, opened beside the first poll instead of before it.

Opening the sandbox means probing it: a real bubblewrap run plus the sandbox's own /etc, about
a third of a second of start-up on a small machine. Nothing before the first poll needs it,
so the gateway starts polling first and the probe runs in a thread meanwhile. Until the probe
has said yes, `ready` is False and the exec tool is not offered (gateway/assembly/exec.py
makes `ready` part of who the tool is offered to): a turn that starts before then simply has
no exec tool, as on a host where the sandbox cannot run. There is never a host fallback: the
only thing a run can get from here is an opened `Sandbox`, and `opened()` raises
`SandboxUnavailable` when the probe said no. A run that was approved before a restart (the
approval desk) waits for the probe's answer instead of being refused early.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from gateway.features.exec.sandbox import Sandbox, SandboxUnavailable

__all__ = ["SandboxGate"]

log = logging.getLogger(__name__)


class SandboxGate:
    """One sandbox, opened once in the background by `start()`; `ready` once it works."""

    def __init__(self, opener: Callable[[], Sandbox]) -> None:
        """`opener` probes and opens the sandbox (`Sandbox.open` with the settings), raising
        SandboxUnavailable where it cannot run; it runs in a thread, once."""
        self._opener = opener
        self._task: asyncio.Task[Sandbox] | None = None
        self._sandbox: Sandbox | None = None
        self._closed = False

    @property
    def ready(self) -> bool:
        """Whether the probe has passed (and the gate is not closed): only then is the tool
        offered."""
        return self._sandbox is not None and not self._closed

    def start(self) -> None:
        """Begin the probe in a thread; returns at once. A second call does nothing."""
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._open(), name="exec-sandbox-probe")
            # Its failure is logged in _open and raised again to whoever waits; none may.
            self._task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _open(self) -> Sandbox:
        try:
            sandbox = await asyncio.to_thread(self._opener)
        except SandboxUnavailable as exc:
            log.warning("the exec tool is not offered: %s (clawgate doctor says more)", exc)
            raise
        except Exception as exc:  # a bug in the probe: no tool, never a host shell
            log.exception("the exec tool is not offered: the sandbox probe failed")
            raise SandboxUnavailable.because(f"the sandbox probe failed ({exc})") from exc
        if self._closed:  # stopped while the probe ran: nobody will use it
            await asyncio.to_thread(sandbox.close)
            raise SandboxUnavailable.because("the gateway is stopping")
        self._sandbox = sandbox
        log.info("the exec tool is offered: %s", sandbox.availability.line())
        return sandbox

    async def opened(self) -> Sandbox:
        """The working sandbox, waiting for the probe if it still runs; SandboxUnavailable
        where it cannot run (the caller refuses the command: nothing runs elsewhere)."""
        if self._closed:
            raise SandboxUnavailable.because("the gateway is stopping")
        self.start()
        assert self._task is not None
        return await asyncio.shield(self._task)

    async def settled(self) -> bool:
        """Wait for the probe's answer (started if it was not); whether the sandbox works."""
        try:
            await self.opened()
        except SandboxUnavailable:
            return False
        return True

    async def close(self) -> None:
        """Wait for a probe still running (it cannot be stopped from outside: it is bounded
        by its own timeout), then close the sandbox if it opened."""
        self._closed = True
        task = self._task
        if task is None:
            return
        await asyncio.gather(task, return_exceptions=True)
        if self._sandbox is not None:
            sandbox, self._sandbox = self._sandbox, None
            await asyncio.to_thread(sandbox.close)
