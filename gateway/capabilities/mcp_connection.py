"""One MCP server, kept connected: start-up, calls with a timeout, restart with backoff.

A supervisor task owns the SDK client (its transports are anyio task groups, which must be
entered and left by the same task) and runs one connection attempt after another:

    start (bounded by startup_timeout) -> ready: list the tools -> wait until the connection
    is lost or the gateway stops -> back off (restart_initial * 2^failures, at most
    restart_max) -> start again.

Turns call `call()` from their own tasks. Whatever the server does (never start, write
garbage, hang, crash mid-call, answer with something malformed), `call()` either returns the
SDK's result or raises `McpCallError` with one line meant for the model; nothing else escapes,
and the gateway and the turn go on. A stdio server's stderr is logged at debug level with the
server's secrets masked, and its last lines explain a failed start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from gateway.config.mcp import McpServerSettings

log = logging.getLogger(__name__)

Status = Literal["stopped", "starting", "ready", "down"]
Sleep = Callable[[float], Awaitable[None]]

# Calls wait this long past the SDK's own read timeout before we give up on the SDK too.
CALL_GRACE_SECONDS = 5.0
# A server whose calls time out this many times in a row is presumed wedged and restarted.
MAX_CONSECUTIVE_TIMEOUTS = 3
MAX_TOOLS = 500
MAX_LIST_PAGES = 20
STDERR_TAIL_LINES = 5
STDERR_LINE_CHARS = 400
STOP_TIMEOUT_SECONDS = 10.0


class McpCallError(Exception):
    """A call that did not produce a result; `str()` is shown to the model as the tool error."""


@dataclass
class ServerCounters:
    starts: int = 0
    failed_starts: int = 0
    restarts: int = 0
    calls: int = 0
    errors: int = 0  # the tool answered with is_error, or the server with an MCP error
    timeouts: int = 0
    crashes: int = 0  # connection lost during or between calls


@dataclass(frozen=True, slots=True)
class ServerStatus:
    name: str
    status: Status
    tools: int
    detail: str  # one line: why it is down, or what it is
    counters: ServerCounters = field(default_factory=ServerCounters)


class McpConnection:
    def __init__(
        self,
        name: str,
        settings: McpServerSettings,
        *,
        redact: Callable[[str], str],
        sleep: Sleep | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.settings = settings
        self.redact = redact
        self._sleep = sleep
        self._monotonic = monotonic
        self.status: Status = "stopped"
        self.tools: list[types.Tool] = []  # last listing; kept while restarting
        self.counters = ServerCounters()
        self.last_error = ""
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()  # connection lost or stopping
        self._ready = asyncio.Event()
        self._attempted = asyncio.Event()  # the first start attempt is over, either way
        self._failures = 0
        self._timeouts_in_row = 0
        self._retry_at = 0.0
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}")

    async def wait_started(self, timeout: float) -> bool:
        """Wait for the first start attempt to end (ready or failed); True if ready."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._attempted.wait()
        return self.status == "ready"

    async def wait_ready(self, timeout: float) -> bool:
        """Wait until the server is connected (after a start or a restart); True if it is."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        return self.status == "ready"

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            async with asyncio.timeout(STOP_TIMEOUT_SECONDS):
                await asyncio.shield(task)
        except TimeoutError:
            log.warning(
                "mcp %s: did not stop within %.0f s; cancelling", self.name, STOP_TIMEOUT_SECONDS
            )
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                # Ours (the task we just cancelled) is expected; the caller's own cancellation
                # while we wait must go on up, not be swallowed here.
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            except Exception as exc:
                log.debug("mcp %s: ended with %s while cancelled", self.name, type(exc).__name__)
        self.status = "stopped"

    def snapshot(self) -> ServerStatus:
        if self.status == "ready":
            detail = f"{len(self.tools)} tools"
        elif self.status == "down":
            wait = max(self._retry_at - self._monotonic(), 0.0)
            when = f"next attempt in {wait:.0f} s" if wait >= 1 else "trying again now"
            detail = f"{self.last_error or 'not connected'}; {when}"
        else:
            detail = self.last_error or self.status
        return ServerStatus(self.name, self.status, len(self.tools), detail, self.counters)

    # -- calls -------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        client = await self._ready_client()
        self.counters.calls += 1
        limit = self.settings.call_timeout_seconds
        try:
            async with asyncio.timeout(limit + CALL_GRACE_SECONDS):
                result = await client.call_tool(tool, arguments, read_timeout_seconds=limit)
        except TimeoutError:
            raise self._timed_out() from None
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise self._timed_out() from None
            if exc.code == types.CONNECTION_CLOSED:
                self._lost("the connection closed during a call")
                raise McpCallError(
                    f"the {self.name} server stopped during this call (it is being restarted); "
                    "the call may or may not have taken effect"
                ) from None
            self.counters.errors += 1
            self._answered()
            raise McpCallError(
                f"the {self.name} server refused the call: {self.redact(exc.message)}"
            ) from None
        except ValidationError:
            self.counters.errors += 1
            self._answered()
            raise McpCallError(f"the {self.name} server returned a malformed result") from None
        except McpCallError:
            raise
        except Exception as exc:  # transport failures (HTTP errors, broken pipes...)
            self._lost(f"{type(exc).__name__} during a call")
            raise McpCallError(
                f"the {self.name} server could not be reached "
                f"({type(exc).__name__}); it is being reconnected"
            ) from None
        self._answered()
        if result.is_error:
            self.counters.errors += 1
        return result

    async def _ready_client(self) -> Client:
        """The connected client; a (re)start due within the call's timeout is waited for."""
        if self.status in ("starting", "down"):
            until_retry = 0.0
            if self.status == "down":
                until_retry = max(self._retry_at - self._monotonic(), 0.0)
            wait = min(
                until_retry + self.settings.startup_timeout_seconds,
                self.settings.call_timeout_seconds,
            )
            if until_retry < wait:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._ready.wait()
        client = self._client
        if client is None or self.status != "ready":
            raise McpCallError(
                f"the {self.name} server is unavailable: "
                f"{self.snapshot().detail}. Tell the person, or try again later."
            )
        return client

    def _answered(self) -> None:
        self._failures = 0
        self._timeouts_in_row = 0

    def _timed_out(self) -> McpCallError:
        self.counters.timeouts += 1
        self._timeouts_in_row += 1
        limit = self.settings.call_timeout_seconds
        if self._timeouts_in_row >= MAX_CONSECUTIVE_TIMEOUTS:
            self._lost(f"{self._timeouts_in_row} calls in a row timed out")
            self._timeouts_in_row = 0
        return McpCallError(
            f"the {self.name} server did not answer within {limit:g} s; the call was abandoned"
        )

    def _lost(self, why: str) -> None:
        if self.status == "ready":
            self.counters.crashes += 1
            self.last_error = why
            log.warning("mcp %s: %s; restarting", self.name, why)
            self._ready.clear()
            self.status = "starting"
            self._wake.set()

    # -- supervisor --------------------------------------------------------------------------

    async def _supervise(self) -> None:
        while not self._stopping.is_set():
            self.status = "starting"
            self._wake.clear()
            try:
                await self._connect_and_serve()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # an ExceptionGroup from the transport included
                self._failed(exc)
            finally:
                self._client = None
                self._ready.clear()
            self._attempted.set()
            if self._stopping.is_set():
                break
            self._failures += 1
            delay = min(
                self.settings.restart_initial_seconds * 2 ** (self._failures - 1),
                self.settings.restart_max_seconds,
            )
            self.status = "down"
            self._retry_at = self._monotonic() + delay
            await self._pause(delay)
            if not self._stopping.is_set():
                self.counters.restarts += 1
        self.status = "stopped"

    async def _connect_and_serve(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            started = self._monotonic()
            try:
                async with asyncio.timeout(self.settings.startup_timeout_seconds):
                    client = await self._open(stack)
                    tools = await self._list_tools(client)
            except TimeoutError:
                raise _StartFailed(
                    f"no answer within {self.settings.startup_timeout_seconds:g} s of starting"
                ) from None
            self.tools = tools
            self._client = client
            self.counters.starts += 1
            self.status = "ready"
            self.last_error = ""
            self._ready.set()
            self._attempted.set()
            log.info(
                "mcp %s: ready with %d tools in %.1f s",
                self.name,
                len(tools),
                self._monotonic() - started,
            )
            await self._wake.wait()

    async def _open(self, stack: contextlib.AsyncExitStack) -> Client:
        settings = self.settings
        if settings.url:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            headers = {k: v.get_secret_value() for k, v in settings.headers.items()}
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=headers,
                    timeout=httpx2.Timeout(30.0, read=settings.call_timeout_seconds),
                )
            )
            transport: Any = streamable_http_client(settings.url, http_client=http)
        else:
            errlog = await stack.enter_async_context(self._stderr_pipe())
            params = StdioServerParameters(
                command=settings.command,
                args=settings.args,
                env={k: v.get_secret_value() for k, v in settings.env.items()},
                cwd=settings.cwd,
            )
            transport = stdio_client(params, errlog=errlog)
        return await stack.enter_async_context(Client(transport))

    async def _list_tools(self, client: Client) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or len(tools) >= MAX_TOOLS:
                break
        wanted = set(self.settings.tools)
        return [t for t in tools if not wanted or t.name in wanted][:MAX_TOOLS]

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            exc = _first_leaf(exc)
        if isinstance(exc, _StartFailed):
            why = str(exc)
        elif isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
            why = "the server exited or closed its connection while starting"
        elif isinstance(exc, MCPError):
            why = f"MCP error while starting: {exc.message}"
        elif isinstance(exc, FileNotFoundError | PermissionError):
            why = f"cannot run {self.settings.command!r}: {exc.strerror}"
        else:
            why = f"{type(exc).__name__}: {exc}"
        if self._stderr:
            why += f" (stderr: {self._stderr[-1]})"
        why = self.redact(why)
        if self.status == "starting" and self._client is None:
            self.counters.failed_starts += 1
        self.last_error = why
        log.warning("mcp %s: %s", self.name, why)

    async def _pause(self, seconds: float) -> None:
        if self._sleep is not None:
            await self._sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()

    @contextlib.asynccontextmanager
    async def _stderr_pipe(self) -> AsyncIterator[TextIO]:
        """A pipe for the child's stderr; each line is logged (masked) and the last few kept."""
        read_fd, write_fd = os.pipe()
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0)
        )
        pump = asyncio.create_task(self._pump(reader))
        writer = os.fdopen(write_fd, "w")
        try:
            yield writer
        finally:
            writer.close()
            try:
                async with asyncio.timeout(1.0):
                    await pump
            except TimeoutError:
                pump.cancel()
            transport.close()

    async def _pump(self, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                raw = await reader.readline()
            except (ValueError, OSError):  # an over-long line, or the pipe broke
                continue
            if not raw:
                return
            line = self.redact(raw.decode("utf-8", "replace").rstrip()[:STDERR_LINE_CHARS])
            if line:
                self._stderr.append(line)
                log.debug("mcp %s stderr: %s", self.name, line)


class _StartFailed(Exception):
    pass


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
