"""Approvals through the loopback Discord: the real discord.py client, message components
on the question and INTERACTION_CREATE for a press, answered through the interaction
callback endpoint; the real sandbox runs what the owner approved.

Discord user 301 is the owner (settings `owner = "discord-301"`); 302 is another person.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.features.exec.approvals_store import ApprovalStore
from gateway.pipeline.gateway import Gateway
from tests.conftest import llm_overrides
from tests.fakes.discord_server import FakeDiscordServer, SentMessage
from tests.gateway.features.exec.conftest import sandbox_settled, wait_until

OPTIONS = {"discord": {"guild_ready_timeout": 0.05, "ready_timeout": 10}}
OWNER, OTHER = 301, 302
OWNER_DM = str(OWNER + 1)  # the fake's DM channel of a user


@pytest.fixture
async def dc_gateway(
    make_settings, anthropic_server, dc, sandbox_works
) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(**exec_settings: Any) -> Gateway:
        settings = make_settings(
            **llm_overrides(anthropic_server),
            discord={"token": dc.token, "allow_from": [str(OWNER), str(OTHER)]},
            owner=f"discord-{OWNER}",
            exec=exec_settings,
        )
        gateway = build_gateway(settings, build_provider(settings), options=OPTIONS, with_exec=True)
        assert gateway.presses is not None
        await gateway.start()
        await dc.identified.wait()
        running.append(gateway)
        assert await sandbox_settled(gateway)  # the tool is offered from here on
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)


async def question(dc: FakeDiscordServer) -> SentMessage:
    await wait_until(lambda: bool(dc.with_components), what="the question")
    return dc.with_components[0]


def tool_result(server: Any) -> str:
    return json.dumps(
        [
            block
            for message in server.requests[-1]["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]
    )


async def test_a_button_press_approves_and_the_question_is_rewritten(
    dc_gateway, dc, anthropic_server
):
    gateway = await dc_gateway()
    anthropic_server.reply_tool_call("exec", {"command": "echo via-discord | rev"})
    anthropic_server.reply_text("reversed it")
    await dc.dm(OWNER, "reverse it")
    asked = await question(dc)
    assert asked.channel_id == OWNER_DM and "echo via-discord | rev" in asked.content
    assert [c.split(":")[1] for c in asked.custom_ids()] == ["once", "always", "deny"]
    stranger = await dc.press(OTHER, asked, asked.custom_ids()[0], name="mallory")
    refusal = await dc.wait_response(stranger)
    assert refusal["type"] == 4 and refusal["data"]["flags"] == 64  # to the presser alone
    assert "Only the owner" in refusal["data"]["content"]
    assert asked.custom_ids()  # unchanged, still answerable
    interaction = await dc.press(OWNER, asked, asked.custom_ids()[0])
    response = await dc.wait_response(interaction)
    assert response["type"] == 7 and response["data"]["components"] == []
    assert asked.content.startswith("Approved (once)") and asked.custom_ids() == []
    await wait_until(lambda: "reversed it" in dc.texts(OWNER_DM), what="the reply")
    assert "drocsid-aiv" in tool_result(anthropic_server)
    [run] = await ApprovalStore(gateway.state.database).runs()
    assert run.approved_by == f"discord:{OWNER}" and run.exit_code == 0


async def test_deny_with_a_button(dc_gateway, dc, anthropic_server):
    gateway = await dc_gateway()
    anthropic_server.reply_tool_call("exec", {"command": "echo no | cat"})
    anthropic_server.reply_text("fine, not run")
    await dc.dm(OWNER, "try")
    asked = await question(dc)
    interaction = await dc.press(OWNER, asked, asked.custom_ids()[2])
    assert (await dc.wait_response(interaction))["type"] == 7
    assert asked.content.startswith("Denied")
    await wait_until(lambda: "fine, not run" in dc.texts(OWNER_DM), what="the reply")
    assert await ApprovalStore(gateway.state.database).runs() == []
