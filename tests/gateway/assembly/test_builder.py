"""The assembly: only what the configuration uses is imported; a failed start unwinds."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.assembly.builder import (
    RUN,
    GatewayApp,
    Plan,
    StartupError,
    assemble_parts,
)
from tests.conftest import TEST_KEY

PROBE = """
import json, sys
from gateway.assembly.builder import RUN, build_gateway
from gateway.config.settings import load_settings
gateway = build_gateway(load_settings(), RUN)
print(json.dumps({name: name in sys.modules for name in
                  ("anthropic", "openai", "discord", "telegram", "channels.discord_channel")}))
"""


def _imports(tmp_path: Path, **env: str) -> dict[str, bool]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CLAWGATE_")}
    clean.update(
        {
            "CLAWGATE_CONFIG": str(tmp_path / "none.toml"),
            "CLAWGATE_WORKSPACES_DIR": str(tmp_path / "ws"),
            **env,
        }
    )
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=clean,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return json.loads(out)


def test_openai_with_telegram_imports_neither_anthropic_nor_discord(tmp_path):
    loaded = _imports(
        tmp_path,
        CLAWGATE_LLM__PROVIDER="openai",
        OPENAI_API_KEY="sk-x",
        CLAWGATE_TELEGRAM__TOKEN="123456789:AAF-test-token-0123456789abcdefghijkl",
    )
    assert loaded == {
        "anthropic": False,
        "openai": False,
        "discord": False,
        "telegram": True,
        "channels.discord_channel": False,
    }


async def test_the_provider_sdk_is_built_at_the_first_call(make_settings, anthropic_server):
    from gateway.agent.providers.deferred import DeferredProvider

    settings = make_settings(llm={"base_url": anthropic_server.base_url, "api_key": TEST_KEY})
    plan = Plan(channels="none", health=False, heartbeats=False)
    parts = assemble_parts(settings, plan)
    deferred = parts.provider.inner  # type: ignore[attr-defined]
    assert isinstance(deferred, DeferredProvider) and not deferred.built
    async with GatewayApp(settings, plan, parts=parts):
        for _ in range(200):
            if deferred.built:
                break
            await asyncio.sleep(0.01)
        assert deferred.built  # warmed in the background once started


async def test_a_busy_port_unwinds_and_leaves_nothing_open(make_settings, anthropic_server):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        settings = make_settings(
            llm={"base_url": anthropic_server.base_url, "api_key": TEST_KEY},
            health={"enabled": True, "port": port},
        )
        app = GatewayApp(settings, RUN)
        with pytest.raises(StartupError, match="CLAWGATE_HEALTH__PORT"):
            await app.start()
    assert not app.gateway.state.is_open


async def test_a_failing_service_unwinds_the_gateway(make_settings, anthropic_server):
    stopped: list[str] = []

    class Broken:
        async def start(self) -> None:
            raise RuntimeError("scheduler cannot start")

        async def stop(self) -> None:
            stopped.append("broken")

    class Fine:
        async def start(self) -> None:
            pass

        async def stop(self) -> None:
            stopped.append("fine")

    settings = make_settings(llm={"base_url": anthropic_server.base_url, "api_key": TEST_KEY})
    app = GatewayApp(
        settings,
        Plan(channels="none", health=False, heartbeats=False),
        services=[lambda gw: Fine(), lambda gw: Broken()],
    )
    with pytest.raises(RuntimeError, match="scheduler"):
        await app.start()
    assert stopped == ["fine"]  # the started one is stopped; the broken one never started
    assert not app.gateway.state.is_open


async def test_a_new_persons_heartbeat_timer_starts_with_their_workspace(
    make_settings, anthropic_server
):
    from gateway.agent.providers import build_provider
    from gateway.pipeline.parts import build_parts
    from tests.conftest import AllowAll
    from tests.fakes.channel import RecordingChannel

    settings = make_settings(llm={"base_url": anthropic_server.base_url, "api_key": TEST_KEY})
    channel = RecordingChannel()
    parts = build_parts(settings, build_provider(settings), channels=[channel], access=AllowAll())
    plan = Plan(channels="none", health=False, heartbeats=True, panel=False)
    async with GatewayApp(settings, plan, parts=parts) as app:
        assert app.heartbeats.persons == []  # type: ignore[union-attr]
        await channel.inject("newcomer", "hello")
        await channel.wait_for(1)
        assert "fakechat-newcomer" in app.heartbeats.persons  # type: ignore[union-attr]
