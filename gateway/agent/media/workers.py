"""Where media work runs: its own few threads and killable child processes, never the
default executor.

Why: asyncio's default executor (6 threads on 2 cores) is what file I/O, the embedder and
every other `to_thread` of the gateway wait on. Six PDFs whose extraction ran there for
minutes held all six threads, and the owner's DMs got no answer for a minute. So media work
gets `slots` (`[media] workers`, 2) of its own: at most that many jobs at once, in-process
ones on a pool of that many threads, and the rest wait their turn without holding anything
the gateway needs.

Work whose cost the input decides (a PDF's text) runs in a child process instead, killed at
its deadline: the only timeout that really ends it. In-process work is bounded by its input
before it starts (pixels for an image, seconds for a recording).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# What a child keeps of the gateway's environment: no key or token goes with it.
_CHILD_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "PYTHONHASHSEED")
# Where `gateway` is imported from, so the child finds the same code however it is installed.
_CODE_ROOT = str(Path(__file__).resolve().parents[3])


class ChildTimeout(Exception):
    """The child did not finish by its deadline; it has been killed."""


class ChildFailed(Exception):
    """The child ended without an answer (crashed, or killed by its own limits)."""


class MediaWorkers:
    def __init__(self, slots: int = 2) -> None:
        self.slots = slots
        self._free = asyncio.Semaphore(slots)
        self._threads = ThreadPoolExecutor(slots, thread_name_prefix="clawgate-media")
        # Child processes running now (pid -> module): for the status page and the tests.
        self.children: dict[int, str] = {}

    async def thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` on a media thread, once a slot is free."""
        async with self._free:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._threads, functools.partial(fn, *args, **kwargs))

    async def child(self, module: str, job: dict[str, Any], seconds: float) -> dict[str, Any]:
        """Run `python -m module` with `job` as JSON on stdin, once a slot is free; its JSON
        answer. The child is killed at `seconds` (ChildTimeout), and whenever this call is
        cancelled: it never outlives the call."""
        async with self._free:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                module,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=_child_env(),
                start_new_session=True,
            )
            self.children[process.pid] = module
            try:
                async with asyncio.timeout(seconds):
                    out, err = await process.communicate(json.dumps(job).encode())
            except TimeoutError:
                raise ChildTimeout(f"{module} ran past {seconds:g} s") from None
            finally:
                try:
                    if process.returncode is None:
                        with contextlib.suppress(ProcessLookupError):
                            process.kill()
                        # Reaped even if this task is cancelled again meanwhile.
                        await asyncio.shield(process.wait())
                finally:
                    self.children.pop(process.pid, None)
        try:
            answer = json.loads(out)
        except ValueError:
            answer = None
        if process.returncode != 0 or not isinstance(answer, dict):
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            log.warning(
                "%s ended with %s and no answer: %s", module, process.returncode, tail[0][:200]
            )
            raise ChildFailed(f"{module} ended with {process.returncode}")
        return answer

    def close(self) -> None:
        """Let no new thread start; the running ones end with their (bounded) work."""
        self._threads.shutdown(wait=False, cancel_futures=True)


def _child_env() -> dict[str, str]:
    env = {name: os.environ[name] for name in _CHILD_ENV if name in os.environ}
    extra = os.environ.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_CODE_ROOT, extra) if p)
    return env
