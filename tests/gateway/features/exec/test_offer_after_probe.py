"""The sandbox is probed beside the first poll, not before it (features/exec/gate.py): the exec
tool is offered only once the probe has passed, never before and never where it failed, and a
command never runs anywhere but in bubblewrap.

The gateway is the real one (python-telegram-bot against the loopback Bot API, the fake model);
its `[exec] bwrap` is a wrapper around the real bubblewrap that holds every sandbox run (the
probe's) until the test lets it go, so "before the probe has passed" is a state the test
controls instead of a race it hopes to win.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.providers import build_provider
from gateway.agent.tools import ToolContext
from gateway.assembly.platforms import build_gateway
from gateway.features.exec.desk import ApprovalDesk
from gateway.features.exec.probe import find_bwrap
from gateway.pipeline.gateway import Gateway
from gateway.workspace.seed import ensure_workspace
from memory.layout import dm_session_key
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.llm_server import FakeAnthropicServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.gateway.features.exec.conftest import wait_until

OWNER = 42
FAST = {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}


def _held_bwrap(tmp_path: Path) -> tuple[str, Path]:
    """A bwrap that answers --version at once and starts a sandbox only once `go` exists."""
    real = find_bwrap()
    assert real is not None
    go = tmp_path / "go"
    wrapper = tmp_path / "held-bwrap"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] && exec {real} --version\n'
        f"touch {tmp_path / 'probing'}\n"
        f"while [ ! -e {go} ]; do sleep 0.02; done\n"
        f'exec {real} "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return str(wrapper), go


def _failing_bwrap(tmp_path: Path) -> str:
    """A bwrap whose sandbox cannot start, as in a container that forbids namespaces."""
    fake = tmp_path / "failing-bwrap"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && echo "bubblewrap 0.8.0" && exit 0\n'
        "echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    return str(fake)


@pytest.fixture
async def started(
    make_settings: Callable[..., Any],
    anthropic_server: FakeAnthropicServer,
    tg: FakeTelegramServer,
    sandbox_works: None,
) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(bwrap: str, *, start: bool = True) -> Gateway:
        settings = make_settings(
            **llm_overrides(anthropic_server),
            telegram={
                "token": tg.token,
                "base_url": tg.base_url,
                "poll_timeout_seconds": 1,
                "allow_from": [str(OWNER)],
            },
            owner=f"telegram-{OWNER}",
            exec={"bwrap": bwrap, "mode": "off"},
        )
        gateway = build_gateway(
            settings, build_provider(settings), options={"telegram": FAST}, with_exec=True
        )
        running.append(gateway)
        if start:
            await gateway.start()
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)


def _desk(gateway: Gateway) -> ApprovalDesk:
    assert isinstance(gateway.presses, ApprovalDesk)
    return gateway.presses


def _offered(server: FakeAnthropicServer) -> list[str]:
    """The tool names of the model's last request."""
    return [tool["name"] for tool in server.requests[-1].get("tools") or []]


async def _ask(tg: FakeTelegramServer, server: FakeAnthropicServer, text: str) -> list[str]:
    seen = len(server.requests)
    server.reply_text(f"answer to {text}")
    await tg.send_text(OWNER, text)
    await wait_until(lambda: f"answer to {text}" in tg.texts(OWNER), what="the reply")
    assert len(server.requests) == seen + 1
    return _offered(server)


async def test_the_tool_is_offered_only_once_the_probe_has_passed(
    started, tg, anthropic_server, tmp_path
):
    bwrap, go = _held_bwrap(tmp_path)
    try:
        gateway = await started(bwrap)
        gate = _desk(gateway).runner.gate
        # The gateway polls and answers while the probe is held inside bubblewrap's start.
        before = await _ask(tg, anthropic_server, "first")
        assert "read_file" in before and "exec" not in before
        assert not gate.ready
        owner_ws = ensure_workspace(gateway.settings.workspaces_dir, gateway.settings.owner)
        beat = gateway.parts.setup.heartbeat_tools(gateway.settings.owner, owner_ws)
        assert "exec" not in beat and "read_file" in beat
    finally:
        go.touch()
    assert await gate.settled()
    after = await _ask(tg, anthropic_server, "second")
    assert "exec" in after
    beat = gateway.parts.setup.heartbeat_tools(gateway.settings.owner, owner_ws)
    assert "exec" in beat
    # And what is offered now runs, in the sandbox.
    anthropic_server.reply_tool_call("exec", {"command": "echo $((6*7)); id -u"})
    anthropic_server.reply_text("ran it")
    await tg.send_text(OWNER, "run it")
    await wait_until(lambda: "ran it" in tg.texts(OWNER), what="the reply")
    result = str(anthropic_server.requests[-1]["messages"][-1]["content"])
    assert "42" in result and "1000" in result  # the sandbox's own user, not ours


async def test_where_the_probe_fails_the_tool_is_never_offered_and_nothing_runs(
    started, tg, anthropic_server, tmp_path
):
    gateway = await started(_failing_bwrap(tmp_path))
    gate = _desk(gateway).runner.gate
    assert not await gate.settled()
    assert not gate.ready
    assert "exec" not in await _ask(tg, anthropic_server, "hello")
    # Even asked directly (a stale registry, a model naming a tool it was not given), the tool
    # refuses: there is no other place a command could run.
    marker = tmp_path / "ran-on-the-host"
    workspace = ensure_workspace(gateway.settings.workspaces_dir, gateway.settings.owner)
    ctx = ToolContext(
        workspace,
        dm_session_key(gateway.settings.owner),
        True,
        budget=gateway.parts.setup.turn_budget(),
        attended=True,
    )
    outcome = await gateway.parts.setup.private_tools.run(
        "exec", {"command": f"touch {marker}"}, ctx
    )
    assert outcome.is_error and "sandbox cannot run here" in outcome.text
    assert not marker.exists()


async def test_messages_left_unanswered_wait_for_the_probe_and_get_the_tool(
    started, tg, anthropic_server, tmp_path
):
    """A restart with messages the last run recorded but did not answer (a crash, maybe in
    the middle of a command): their turns get the tools they had, so this start waits for the
    probe before any channel runs (and they stay ahead of newer messages)."""
    first = await started(find_bwrap())
    first.stop_intake()  # from here messages are recorded, left for the next start
    await tg.send_text(OWNER, "left over")
    await wait_until(
        lambda: _pending(first), what="the message recorded and left for the next start"
    )
    await first.stop(drain_timeout=5)
    polls, asked = len(tg.offsets_seen), len(anthropic_server.requests)
    bwrap, go = _held_bwrap(tmp_path)
    anthropic_server.reply_text("answered after the restart")
    second = await started(bwrap, start=False)
    starting = asyncio.ensure_future(second.start())
    try:
        await wait_until(lambda: (tmp_path / "probing").exists(), what="the probe")
        # Held inside the probe: no channel polls and no turn has run yet.
        assert not starting.done()
        assert len(tg.offsets_seen) == polls and len(anthropic_server.requests) == asked
    finally:
        go.touch()
    await starting
    await wait_until(
        lambda: "answered after the restart" in tg.texts(OWNER), what="the resumed reply"
    )
    assert "left over" in str(anthropic_server.requests[-1]["messages"])
    assert "exec" in _offered(anthropic_server)


async def _pending(gateway: Gateway) -> bool:
    return bool(await gateway.state.inbox.pending_inbound())


async def test_a_gateway_without_channels_waits_for_the_probe(
    make_settings, anthropic_server, sandbox_works, tmp_path
):
    """`clawgate heartbeat run` starts no channel: there is no first poll to hurry, and its one
    beat gets the tools a beat gets, so its start waits for the probe."""
    bwrap, go = _held_bwrap(tmp_path)
    settings = make_settings(
        **llm_overrides(anthropic_server),
        owner="owner",
        exec={"bwrap": bwrap, "mode": "off"},
    )
    gateway = build_gateway(
        settings, build_provider(settings), with_platforms=False, with_exec=True
    )
    starting = asyncio.ensure_future(gateway.start())
    try:
        try:
            await wait_until(lambda: (tmp_path / "probing").exists(), what="the probe")
            assert not starting.done()
        finally:
            go.touch()
        await starting
        owner_ws = ensure_workspace(settings.workspaces_dir, settings.owner)
        assert "exec" in gateway.parts.setup.heartbeat_tools(settings.owner, owner_ws)
    finally:
        await gateway.stop(drain_timeout=5)
