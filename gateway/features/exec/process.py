"""bubblewrap as a child process that never holds up the event loop.

asyncio's own subprocess support forks in the loop's thread: about 5 ms of a gateway process
each time, so 20 commands starting together held every DM for ~100 ms (bench/
exec_sandbox.py). Here the fork happens in a worker thread; the output is read on the loop
(`connect_read_pipe`) and the exit is seen through a pidfd, so no thread waits per command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from concurrent.futures import Executor
from functools import partial

__all__ = ["Child"]


class Child:
    """One started bubblewrap: its merged stdout/stderr, its exit, and a kill for the whole
    sandbox (SIGKILL to bubblewrap's process group; the sandbox dies with it)."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdout: asyncio.StreamReader,
        transport: asyncio.BaseTransport,
    ) -> None:
        self._popen = popen
        self.stdout = stdout
        self._transport = transport
        self._exited = asyncio.Event()
        self._pidfd = -1
        loop = asyncio.get_running_loop()
        try:
            self._pidfd = os.pidfd_open(popen.pid)
            loop.add_reader(self._pidfd, self._exited.set)
        except (AttributeError, OSError):  # no pidfd (Linux < 5.3): a thread waits instead
            loop.run_in_executor(None, popen.wait).add_done_callback(lambda _f: self._exited.set())

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        pass_fds: Sequence[int],
        executor: Executor,
    ) -> Child:
        loop = asyncio.get_running_loop()
        popen = await loop.run_in_executor(
            executor, partial(_popen, list(argv), env, tuple(pass_fds))
        )
        assert popen.stdout is not None
        reader = asyncio.StreamReader(limit=1 << 16)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), popen.stdout
        )
        return cls(popen, reader, transport)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """bubblewrap's status once it ended (the command's; negative: killed by a signal)."""
        return self._popen.returncode if self._exited.is_set() else None

    async def wait(self) -> int:
        await self._exited.wait()
        if self._pidfd >= 0:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1
        return self._popen.wait()

    def kill(self) -> None:
        if not self._exited.is_set() or self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._popen.pid, signal.SIGKILL)

    def close(self) -> None:
        self._transport.close()
        if self._pidfd >= 0:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1


def _popen(
    argv: list[str], env: dict[str, str], pass_fds: tuple[int, ...]
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        pass_fds=pass_fds,
        start_new_session=True,
        close_fds=True,
    )
