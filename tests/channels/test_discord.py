"""Discord end to end: the real discord.py client against a loopback REST + gateway fake;
and identity links joining a Telegram and a Discord account into one person."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.pipeline.gateway import Gateway
from gateway.workspace.seed import ensure_workspace
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.discord_server import FakeDiscordServer, patch_discord
from tests.fakes.telegram_server import FakeTelegramServer
from tests.settle import settled

OPTIONS = {
    "telegram": {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5},
    "discord": {"guild_ready_timeout": 0.05, "ready_timeout": 10},
}


@pytest.fixture
async def gateway_with(make_settings, anthropic_server) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(**sections: Any) -> Gateway:
        settings = make_settings(**llm_overrides(anthropic_server), **sections)
        gateway = build_gateway(settings, build_provider(settings), options=OPTIONS)
        await gateway.start()
        running.append(gateway)
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)


async def test_dm_in_reply_out_and_bots_ignored(dc, gateway_with, anthropic_server):
    gateway = await gateway_with(discord={"token": dc.token, "allow_from": ["301", "302"]})
    await dc.dm(302, "beep", bot=True)
    await dc.dm(301, "hello discord")  # handled after the bot's message (events in order)
    sent = await dc.wait_sent(1)
    assert [(m.channel_id, m.content) for m in sent] == [("302", "echo: hello discord")]
    assert "302" in dc.typing
    await settled(gateway.state)
    assert len(dc.sent) == 1 and len(anthropic_server.requests) == 1


async def test_discord_pairing_and_long_reply_chunks(dc, gateway_with, anthropic_server):
    gateway = await gateway_with(discord={"token": dc.token})
    await dc.dm(401, "hi")
    reply = (await dc.wait_sent(1))[0].content
    code = reply.split("code is ")[1].split(" ")[0]
    await gateway.access.pairing.approve("discord", code)  # type: ignore[attr-defined]
    anthropic_server.reply_text(("para " * 300 + "\n\n") * 3 + "```\n" + "x = 1\n" * 300 + "```")
    await dc.dm(401, "long one please")
    await dc.wait_sent(3)
    await settled(gateway.state)  # every chunk sent
    sent = list(dc.sent)
    assert all(len(m.content) <= 2000 for m in sent)
    assert all(m.content.count("```") % 2 == 0 for m in sent[1:])


MEMORY_CANARY = "zebracanary-DC-MEMORY-8123"


async def test_server_message_needs_mention_and_no_private_memory(
    dc, gateway_with, anthropic_server, tmp_path
):
    owner = ensure_workspace(tmp_path / "workspaces", "owner")
    (owner / "MEMORY.md").write_text(f"- {MEMORY_CANARY}\n")
    gateway = await gateway_with(
        discord={"token": dc.token, "groups_enabled": True, "groups": ["7001"]}
    )
    await dc.guild_message(301, 7001, "humans talking")
    # Events are handled in order: once the mention is answered, the first was handled too.
    await dc.guild_message(301, 7001, "<@900000000000000001> summarize please", mention_bot=True)
    sent = await dc.wait_sent(1)
    await settled(gateway.state)
    assert len(dc.sent) == 1 and len(anthropic_server.requests) == 1  # none for the first
    assert sent[0].channel_id == "7001" and sent[0].content == (
        "echo: [ann, platform id discord:301] summarize please"
    )  # who said it, per platform
    assert MEMORY_CANARY not in json.dumps(anthropic_server.requests[-1])
    # discord.py's display name and the account id reach the group prompt.
    assert "Speaking now: ann (platform id 301), not the owner" in json.dumps(
        anthropic_server.requests[-1]
    )


async def test_linked_identities_share_one_session(dc, gateway_with, anthropic_server, tmp_path):
    async with FakeTelegramServer() as tg:
        gateway = await gateway_with(
            discord={"token": dc.token},
            telegram={"token": tg.token, "base_url": tg.base_url, "poll_timeout_seconds": 1},
        )
        # What `clawgate users link telegram:42 discord:301` does.
        for channel, user in (("telegram", "42"), ("discord", "301")):
            await gateway.state.links.link(channel, user, "telegram-42")
            await gateway.state.access.approve(channel, user, via="link")

        await tg.send_text(42, "my locker code is 4711")
        assert (await tg.wait_sent(1))[0].text == "echo: my locker code is 4711"
        await dc.dm(301, "what is my locker code?")
        assert (await dc.wait_sent(1))[0].content == "echo: what is my locker code?"

        # One session: the Discord turn saw the Telegram message.
        assert "my locker code is 4711" in json.dumps(anthropic_server.requests[-1]["messages"])
        sessions = list((tmp_path / "workspaces" / "telegram-42" / "sessions").glob("*.jsonl"))
        assert len(sessions) == 1
        assert not (tmp_path / "workspaces" / "discord-301").exists()
        route = await gateway.parts.routes.last_dm_route("telegram-42")
        assert route is not None and (route.channel, route.chat_id) == ("discord", "302")
        assert tg.texts() == ["echo: my locker code is 4711"]  # replies went back where asked


async def test_dms_sent_while_the_gateway_was_down_are_caught_up(
    dc, gateway_with, anthropic_server
):
    gateway = await gateway_with(discord={"token": dc.token, "allow_from": ["401"]})
    await dc.dm(401, "before the restart")
    await dc.wait_sent(1)
    await gateway.stop(drain_timeout=5)

    dc.missed_dm(401, "sent while down 1")
    dc.missed_dm(401, "sent while down 2")
    gateway = await gateway_with(discord={"token": dc.token, "allow_from": ["401"]})
    sent = await dc.wait_sent(2, timeout=15)
    await settled(gateway.state)
    texts = [m.content for m in dc.sent]
    assert texts[0] == "echo: before the restart"
    assert any("sent while down 1" in t for t in texts[1:])
    assert any(t.endswith("sent while down 2") for t in texts[1:])
    assert sum("before the restart" in t for t in texts) == 1  # nothing answered twice
    assert dc.history_reads >= 1 and len(sent) >= 2


async def test_quick_messages_of_one_person_are_answered_in_order(dc, gateway_with):
    """discord.py runs each on_message in its own task: before, two quick messages of a new
    person raced through intake (workspace seeding, git init) and could be answered out of
    order. The adapter now hands messages over one at a time, in arrival order."""
    people = (311, 312, 313, 314)
    await gateway_with(discord={"token": dc.token, "allow_from": [str(p) for p in people]})
    for person in people:
        for n in range(3):
            await dc.dm(person, f"{person} message {n}")
    await dc.wait_sent(3 * len(people), timeout=30)
    for person in people:
        assert dc.texts(person + 1) == [f"echo: {person} message {n}" for n in range(3)]


async def test_discord_unreachable_at_start_keeps_trying_then_answers(
    monkeypatch, gateway_with, anthropic_server, caplog
):
    """No network at start: the gateway starts, Discord is not ready and
    says so once; when Discord answers, the channel logs in, connects and answers a DM."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = FakeDiscordServer()
    server.port = port  # nothing listens there yet
    patch_discord(monkeypatch, server)
    retries: list[float] = []

    class CountedBackoff(Backoff):
        def next(self) -> float:
            retries.append(delay := super().next())
            return delay

    monkeypatch.setattr(
        "channels.discord_channel.Backoff", lambda: CountedBackoff(0.05, 0.2)
    )  # the schedule, faster
    gateway = await gateway_with(discord={"token": server.token, "allow_from": ["501"]})
    channel = gateway.channels["discord"]
    async with asyncio.timeout(30):
        while len(retries) < 4:  # three attempts failed since the first
            await asyncio.sleep(0.02)
    assert not channel.ready and channel.ready_detail == "connecting: cannot reach Discord"
    assert caplog.text.count("cannot reach Discord") == 1  # said once, not per retry
    async with server:
        await asyncio.wait_for(server.identified.wait(), 10)
        for _ in range(100):
            if channel.ready:
                break
            await asyncio.sleep(0.05)
        assert channel.ready
        await server.dm(501, "you there?")
        sent = await server.wait_sent(1)
        assert [m.content for m in sent] == ["echo: you there?"]
