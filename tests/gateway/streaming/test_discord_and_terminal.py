"""Streamed replies on Discord (a preview message the reply is written into) and in the
terminal chat (printed as they come; the output is the same bytes as without streaming)."""

from __future__ import annotations

import asyncio
import io
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from channels.base import OutboundMessage
from channels.preview import CURSOR
from channels.terminal import REPLY_PREFIX, TerminalChannel
from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.pipeline.gateway import Gateway
from tests.conftest import llm_overrides
from tests.settle import settled

STORY = (
    "Once upon a time a small gateway learned to show its answers while writing them, "
    "word by word, so nobody had to stare at a typing indicator for half a minute."
)
OPTIONS = {"discord": {"guild_ready_timeout": 0.05, "ready_timeout": 10}}


@pytest.fixture
async def gateway_with(
    make_settings: Any, anthropic_server: Any
) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(extra_channels: list[Any] | None = None, **sections: Any) -> Gateway:
        settings = make_settings(**llm_overrides(anthropic_server), **sections)
        gateway = build_gateway(
            settings,
            build_provider(settings),
            options=OPTIONS,
            extra_channels=extra_channels or [],
            with_platforms=extra_channels is None,
        )
        await gateway.start()
        running.append(gateway)
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)


async def test_a_discord_reply_grows_in_one_message(dc, gateway_with, anthropic_server):
    anthropic_server.stream_delay = 0.15  # 22 pieces: about 3.3 s of writing, three intervals
    anthropic_server.reply_text(STORY)
    gateway = await gateway_with(discord={"token": dc.token, "allow_from": ["301"]})
    await dc.dm(301, "tell me a story")
    await dc.wait_sent(1)
    await settled(gateway.state)
    assert [m.content for m in dc.sent] == [STORY]  # the preview became the reply
    message = dc.sent[0]
    assert message.edits >= 2  # it grew, then the reply replaced it
    previews = [message.at, *message.edit_times[:-1]]  # the last edit is the reply
    gaps = [later - earlier for earlier, later in itertools.pairwise(previews)]
    assert gaps, "the reply was written within one interval: the pace was not exercised"
    assert all(gap >= 0.9 for gap in gaps)  # at most one update a second


async def test_discord_streaming_off(dc, gateway_with, anthropic_server):
    anthropic_server.reply_text(STORY)
    gateway = await gateway_with(
        discord={"token": dc.token, "allow_from": ["301"], "streaming": False}
    )
    await dc.dm(301, "tell me a story")
    await dc.wait_sent(1)
    await settled(gateway.state)
    assert [(m.content, m.edits) for m in dc.sent] == [(STORY, 0)]
    assert anthropic_server.streamed == 0


async def test_a_discord_reply_whose_preview_was_deleted_comes_anew(
    dc, gateway_with, anthropic_server
):
    gateway = await gateway_with(discord={"token": dc.token, "allow_from": ["301"]})
    channel = gateway.channels["discord"]
    preview = channel.preview("302", direct=True, key="answer:discord:302:1")
    assert preview is not None
    await preview.show("Half")
    assert dc.sent[0].content == "Half" + CURSOR
    reply = OutboundMessage(
        "discord", "302", "Half and the rest.", key="7", replaces=preview.message_id
    )
    await channel.send(reply)
    await channel.send(reply)  # sent again after a crash: the same edit, nothing new
    assert dc.current_texts("302") == ["Half and the rest."]
    dc.sent[0].deleted = True
    await channel.send(reply)
    assert dc.current_texts("302") == ["Half and the rest."] and len(dc.sent) == 2


class Recorder(io.StringIO):
    """A stdout that remembers each write (a reply printed in pieces is several)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


async def _chat(
    gateway_with: Callable[..., Any], lines: str, *, streaming: bool
) -> tuple[Recorder, TerminalChannel]:
    out = Recorder()
    terminal = TerminalChannel(
        stdin=io.StringIO(lines), stdout=out, interactive=False, streaming=streaming
    )
    await gateway_with(extra_channels=[terminal])
    await asyncio.wait_for(terminal.input_closed.wait(), 30)
    return out, terminal


async def test_a_piped_chat_prints_as_it_comes_and_the_same_bytes(gateway_with, anthropic_server):
    anthropic_server.stream_delay = 0.05
    anthropic_server.reply_text(STORY)
    anthropic_server.reply_text("Short second answer.")
    out, _ = await _chat(gateway_with, "tell me a story\nand another\n", streaming=True)
    assert out.getvalue() == f"{REPLY_PREFIX}{STORY}\n{REPLY_PREFIX}Short second answer.\n"
    end_of_first = next(i for i, text in enumerate(out.writes) if "\n" in text)
    assert end_of_first >= 4  # the first reply came in pieces, as it was written
    assert anthropic_server.streamed == 2


async def test_a_piped_chat_without_streaming_prints_whole_replies(gateway_with, anthropic_server):
    anthropic_server.reply_text(STORY)
    out, _ = await _chat(gateway_with, "tell me a story\n", streaming=False)
    assert out.getvalue() == f"{REPLY_PREFIX}{STORY}\n"
    assert out.writes == [f"{REPLY_PREFIX}{STORY}\n"] and anthropic_server.streamed == 0


async def test_the_interactive_chat_takes_back_text_the_model_took_back():
    out = Recorder()
    terminal = TerminalChannel(stdin=io.StringIO(""), stdout=out, interactive=True, streaming=True)
    preview = terminal.preview("local", direct=True, key="answer:terminal:local:1")
    assert preview is not None
    await preview.show("The primary began")
    await preview.show("")  # restarted (a fallback model): nothing to show yet
    await preview.show("The backup")
    await terminal.send(
        OutboundMessage("terminal", "local", "The backup answers.", replaces=preview.message_id)
    )
    screen = out.getvalue()
    assert screen.startswith(f"{REPLY_PREFIX}The primary began")
    assert "\r\x1b[K" in screen  # the taken-back line was erased
    assert screen.endswith(f"{REPLY_PREFIX}The backup answers.\n")


async def test_a_discord_reply_that_ends_empty_deletes_its_preview(
    dc, gateway_with, anthropic_server
):
    """Red-team round 3: an answer of only HEARTBEAT_OK left "HEARTBEA ▍" in the chat."""
    anthropic_server.stream_delay = 1.0  # the first piece is shown before the second comes
    anthropic_server.reply_text("HEARTBEAT_OK")
    gateway = await gateway_with(discord={"token": dc.token, "allow_from": ["301"]})
    await dc.dm(301, "anything new?")
    await _until(lambda: bool(dc.sent))  # the preview is up
    await settled(gateway.state, timeout=15)
    await gateway.lanes.drain()
    assert dc.sent[0].content.endswith(CURSOR)  # it was a preview
    assert [m.content for m in dc.sent if not m.deleted] == []  # and it is gone


async def _until(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)
