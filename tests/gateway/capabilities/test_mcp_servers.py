"""MCP servers through the real SDK client against tests/fakes/mcp_server.py (stdio): tools
that succeed, fail, hang, crash and flood; servers that never start; secrets; backoff."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.tools.base import ToolContext
from gateway.capabilities.mcp_manager import McpManager
from gateway.config.mcp import McpSettings
from gateway.config.settings import Settings
from gateway.ops.logs import configured_secrets
from tests.fakes.mcp_server import stdio_config

CTX = ToolContext(Path("."), "owner:dm", True)
TOKEN = "tok-5f1c9a77e2b04d1e"


async def started(**servers: dict[str, Any]) -> McpManager:
    manager = McpManager(McpSettings(servers=servers, result_max_chars=1_000))
    await manager.start()
    return manager


@pytest.fixture
async def fake():
    manager = await started(
        fake=stdio_config(env={"FAKE_TOKEN": TOKEN}, restart_initial_seconds=0.1)
    )
    yield manager
    await manager.stop()


async def call(manager: McpManager, tool: str, **args: Any):
    registry = manager.registry([], "owner_dm")
    assert registry is not None
    return await registry.run(tool, args, CTX)


async def test_tools_are_offered_prefixed_with_their_schemas_and_answer(fake):
    registry = fake.registry([], "owner_dm")
    assert registry is not None
    assert registry.names() == [
        "fake__echo",
        "fake__add",
        "fake__fail",
        "fake__hang",
        "fake__crash",
        "fake__flood",
        "fake__env",
    ]
    echo = next(s for s in registry.specs() if s.name == "fake__echo")
    assert echo.description.startswith("[fake] Echo the text back")
    assert echo.parameters["type"] == "object" and "text" in echo.parameters["properties"]
    assert (await call(fake, "fake__echo", text="hi")).text == "echo: hi"
    assert (await call(fake, "fake__add", a=2, b=3)).text == "5"
    status = fake.statuses()[0]
    assert (status.status, status.tools, status.counters.calls) == ("ready", 7, 2)


async def test_a_failing_tool_and_bad_arguments_are_tool_errors(fake):
    failed = await call(fake, "fake__fail", reason="no calendar")
    assert failed.is_error and "fail tool: no calendar" in failed.text
    bad = await call(fake, "fake__add", a="two")
    assert bad.is_error and "fake__add" in bad.text
    assert (await call(fake, "fake__echo", text="still fine")).text == "echo: still fine"


async def test_a_hanging_call_times_out_and_three_in_a_row_restart_the_server():
    fake = await started(fake=stdio_config(call_timeout_seconds=1.0, restart_initial_seconds=0.1))
    try:
        await _hang_then_restart(fake)
    finally:
        await fake.stop()


async def _hang_then_restart(fake: McpManager) -> None:
    hung = await call(fake, "fake__hang")  # it never answers: only the timeout ends the call
    assert hung.is_error and "did not answer within 1 s" in hung.text
    assert (await call(fake, "fake__echo", text="after")).text == "echo: after"
    await call(fake, "fake__hang")
    await call(fake, "fake__hang")
    counters = fake.statuses()[0].counters
    assert counters.timeouts == 3 and counters.crashes == 0  # the echo in between answered
    await call(fake, "fake__hang")
    assert fake.statuses()[0].counters.crashes == 1  # presumed wedged: restarted
    assert await fake.connections["fake"].wait_ready(30)
    assert (await call(fake, "fake__echo", text="fresh")).text == "echo: fresh"
    assert fake.statuses()[0].counters.starts == 2


async def test_a_crash_mid_call_is_a_tool_error_and_the_server_comes_back(fake):
    crashed = await call(fake, "fake__crash")
    assert crashed.is_error and "stopped during this call" in crashed.text
    again = await call(fake, "fake__echo", text="back")  # waits for the restart
    assert (again.is_error, again.text) == (False, "echo: back")
    counters = fake.statuses()[0].counters
    assert (counters.crashes, counters.restarts, counters.starts) == (1, 1, 2)


async def test_results_are_capped_and_secrets_masked(fake):
    flood = await call(fake, "fake__flood", size=200_000)
    assert flood.text.startswith("x" * 1_000)
    assert flood.text.endswith("[result truncated: showed the first 1,000 of 200,000 characters]")
    leaked = await call(fake, "fake__env", name="FAKE_TOKEN")
    assert leaked.text == "[redacted]"  # the server has it; the model never sees it
    assert TOKEN not in repr(fake.registry([], "owner_dm").specs())  # type: ignore[union-attr]


async def test_secrets_in_a_servers_env_never_reach_the_logs(caplog):
    settings = Settings(
        mcp={
            "servers": {
                "fake": stdio_config(env={"FAKE_TOKEN": TOKEN, "FAKE_MCP_LOG_ENV": "FAKE_TOKEN"})
            }
        }
    )
    assert TOKEN in configured_secrets(settings)  # the log formatter masks it everywhere
    with caplog.at_level(logging.DEBUG, logger="gateway.capabilities"):
        manager = McpManager(settings.mcp)
        await manager.start()
        await manager.stop()
    stderr_lines = [r.getMessage() for r in caplog.records if "stderr" in r.getMessage()]
    # (every env value is masked, even FAKE_MCP_LOG_ENV's, which is the name "FAKE_TOKEN")
    assert any("starting with [redacted]=[redacted]" in line for line in stderr_lines)
    assert TOKEN not in caplog.text


async def test_servers_that_never_work_are_down_with_a_reason_and_offer_nothing():
    # The fake needs ~1 s (more on a busy machine) to import the SDK before it misbehaves.
    quick = {"startup_timeout_seconds": 4, "restart_initial_seconds": 30}
    manager = await started(
        # It must fail by exiting, long before its own start-up timeout.
        exits=stdio_config(
            "--exit-at-start", startup_timeout_seconds=20, restart_initial_seconds=30
        ),
        garbage=stdio_config("--garbage", **quick),
        silent=stdio_config("--silent", **quick),
        missing={"command": "/nonexistent/mcp-server", **quick},
    )
    try:
        # start() waits a bounded time; on a loaded machine a first attempt may still be on
        # its way then (its own timeout starts once the process is spawned).
        for connection in manager.connections.values():
            await connection.wait_started(30)
        details = {s.name: (s.status, s.detail) for s in manager.statuses()}
        assert details["exits"][0] == "down"
        assert "exited" in details["exits"][1] and "cannot start (as asked)" in details["exits"][1]
        assert "no answer within 4 s" in details["garbage"][1]
        assert "no answer within 4 s" in details["silent"][1]
        assert "cannot run '/nonexistent/mcp-server'" in details["missing"][1]
        assert all("next attempt in" in detail for _, detail in details.values())
        assert manager.registry([], "owner_dm") is None
    finally:
        await manager.stop()


async def test_restarts_back_off_exponentially_up_to_the_cap():
    delays: list[float] = []
    manager = McpManager(
        McpSettings(
            servers={
                "missing": {
                    "command": "/nonexistent/mcp-server",
                    "restart_initial_seconds": 1,
                    "restart_max_seconds": 5,
                }
            }
        ),
        sleep=lambda seconds: _record(delays, seconds),
    )
    await manager.start()
    for _ in range(100):
        if len(delays) >= 6:
            break
        await asyncio.sleep(0.01)
    await manager.stop()
    assert delays[:6] == [1, 2, 4, 5, 5, 5]
    assert manager.statuses()[0].counters.failed_starts >= 6


async def _record(delays: list[float], seconds: float) -> None:
    delays.append(seconds)
    await asyncio.sleep(0)


async def test_only_listed_tools_and_only_allowed_contexts(tmp_path):
    manager = await started(fake=stdio_config(tools=["echo"], contexts=["owner_dm", "group"]))
    try:
        assert manager.registry([], "owner_dm").names() == ["fake__echo"]  # type: ignore[union-attr]
        assert manager.registry([], "group") is not None
        assert manager.registry([], "heartbeat") is None
        assert manager.registry([], "people") is None
    finally:
        await manager.stop()


async def _http_server(port: int) -> asyncio.subprocess.Process:
    cfg = stdio_config("--http", str(port))
    process = await asyncio.create_subprocess_exec(
        cfg["command"],
        *cfg["args"],
        cwd=cfg["cwd"],
        env={**os.environ, **cfg["env"]},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return process
    process.kill()
    raise AssertionError("the HTTP fake did not start")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_a_streamable_http_server_answers_and_is_reconnected_after_it_dies():
    port = _free_port()
    process = await _http_server(port)
    manager = await started(
        web={
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": {"Authorization": f"Bearer {TOKEN}"},
            "call_timeout_seconds": 5,
            "restart_initial_seconds": 0.2,
        }
    )
    try:
        assert (await call(manager, "web__echo", text="over http")).text == "echo: over http"
        process.kill()
        await process.wait()
        gone = await call(manager, "web__echo", text="anyone?")
        assert gone.is_error and "web" in gone.text and TOKEN not in gone.text
        process = await _http_server(port)  # the server is back: so is the connection
        assert await manager.connections["web"].wait_ready(30)
        assert (await call(manager, "web__echo", text="again")).text == "echo: again"
    finally:
        await manager.stop()
        process.kill()
        await process.wait()
