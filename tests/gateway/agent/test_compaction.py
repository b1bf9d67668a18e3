"""Memory flush and compaction, driven by the usage a fake provider reports."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.agent.compaction import choose_cut, summary_is_valid
from gateway.agent.conversation import Message, ToolCall
from gateway.agent.sessions import SUMMARY_HEADER
from gateway.clock import FixedClock
from gateway.workspace.seed import workspace_path

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
NOTE = "memory/2026-11-29.md"
GOOD_SUMMARY = """## Decisions
- Use the blue tent.
## Open tasks
- Book the campsite.
## Constraints and rules
- Do not pay anything before Ana confirms.
## Pending requests
None
## Exact identifiers
- Gate code 4711"""

# A small window makes the thresholds easy to reach: flush at 7,000 tokens, compact at 8,000.
SMALL_WINDOW: dict[str, Any] = {
    "llm": {"context_window": 10_000},
    "compaction": {
        "reserve_tokens": 2_000,
        "flush_margin_tokens": 1_000,
        "keep_recent_tokens": 1_000,
        "timeout_seconds": 2,
    },
}


class ScriptedModel:
    """Answers each kind of request the gateway makes: normal turns, flushes, summaries."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.kinds: list[str] = []
        self.usage = 100  # input tokens reported for normal turns
        self.summaries: list[str] = [GOOD_SUMMARY]
        self.flush_calls: list[tuple[str, dict[str, Any]]] = [
            ("append_file", {"path": NOTE, "content": "- Gate code is 4711 (from chat)"})
        ]
        self.overflow_next = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        system = json.dumps(body.get("system", ""))
        last = body["messages"][-1]
        last_text = json.dumps(last["content"])
        if "You compress conversations" in system:
            self.kinds.append("summary")
            text = self.summaries.pop(0) if len(self.summaries) > 1 else self.summaries[0]
            return self.server.make_text(text)
        if "Silent memory flush" in json.dumps(body["messages"]):
            if "tool_result" in last_text:
                self.kinds.append("flush-end")
                return self.server.make_text("NO_REPLY")
            self.kinds.append("flush")
            return self.server.make_tool_calls([(n, a, None) for n, a in self.flush_calls])
        if self.overflow_next:
            self.overflow_next -= 1
            self.kinds.append("overflow")
            return self.server.enqueue_error_reply(400, "prompt is too long: 12000 tokens > 10000")
        self.kinds.append("turn")
        return self.server.make_text(
            f"echo: {self.server.last_user_text(body)[-40:]}", input_tokens=self.usage
        )


def _snapshot(workspace: Path) -> dict[str, str]:
    return {
        str(p.relative_to(workspace)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in workspace.rglob("*")
        # .git: the workspace's version history (gateway/ops/versioning.py), not a memory file.
        if p.is_file() and "sessions" not in p.parts and ".git" not in p.parts
    }


async def _gateway(anthropic_server, make_gateway, **extra: Any):
    model = ScriptedModel(anthropic_server)
    anthropic_server.responder = model
    anthropic_server.enqueue_error_reply = lambda status, message: _error(
        anthropic_server, status, message
    )
    settings = {**SMALL_WINDOW, **extra}
    settings["llm"] = {**SMALL_WINDOW["llm"], **extra.get("llm", {})}
    settings["compaction"] = {**SMALL_WINDOW["compaction"], **extra.get("compaction", {})}
    gateway, channel = await make_gateway(
        anthropic_server, clock=FixedClock(NOW), llm=settings.pop("llm"), **settings
    )
    return gateway, channel, model


def _error(server: Any, status: int, message: str) -> Any:
    from tests.fakes.llm_server import Reply

    return Reply(status=status, body=server.error_body(status, message))


async def _say(channel, text: str, expect: int) -> list[str]:
    await channel.inject("ana", text)
    await channel.wait_for(expect)
    return channel.texts()


async def test_flush_runs_once_before_compaction_and_stays_silent(
    anthropic_server, make_gateway, tmp_path
):
    _, channel, model = await _gateway(anthropic_server, make_gateway)
    workspace = workspace_path(tmp_path / "workspaces", "fakechat-ana")

    await _say(channel, "the gate code is 4711 " + "x" * 3_000, 1)
    (workspace / NOTE).write_text("- morning: coffee with Ben\n")
    before = _snapshot(workspace)

    model.usage = 7_500  # past the flush threshold, below compaction
    await _say(channel, "ok " + "y" * 3_000, 2)
    await _say(channel, "and?", 3)
    assert model.kinds == ["turn", "turn", "flush", "flush-end", "turn"]
    after = _snapshot(workspace)
    assert {k for k in after if after[k] != before.get(k)} == {NOTE}
    assert (workspace / NOTE).read_text() == (
        "- morning: coffee with Ben\n- Gate code is 4711 (from chat)"
    )
    assert not any("NO_REPLY" in text for text in channel.texts())

    model.usage = 8_500  # past the compaction threshold: no second flush in this cycle
    await _say(channel, "more", 4)
    await _say(channel, "still here?", 6)
    assert model.kinds[5:] == ["turn", "summary", "turn"]
    assert "Compacted this conversation" in channel.texts()[4]
    assert channel.texts()[5].startswith("echo:")

    # A new cycle may flush again.
    model.usage = 7_500
    await _say(channel, "next cycle", 7)
    assert "flush" in model.kinds[8:]


async def test_flush_cannot_change_any_other_file(anthropic_server, make_gateway, tmp_path):
    _, channel, model = await _gateway(anthropic_server, make_gateway)
    model.flush_calls = [
        ("write_file", {"path": "MEMORY.md", "content": "wiped"}),
        ("append_file", {"path": "MEMORY.md", "content": "sneaky"}),
        ("edit_file", {"path": NOTE, "old_text": "a", "new_text": "b"}),
        ("append_file", {"path": "./memory/../memory/2026-11-29.md", "content": "- kept"}),
    ]
    await _say(channel, "hello", 1)
    workspace = workspace_path(tmp_path / "workspaces", "fakechat-ana")
    memory_before = (workspace / "MEMORY.md").read_text()
    model.usage = 7_500
    await _say(channel, "one", 2)
    await _say(channel, "two", 3)
    assert (workspace / "MEMORY.md").read_text() == memory_before
    assert (workspace / NOTE).read_text() == "- kept"
    flush_end = next(
        r
        for r in anthropic_server.requests
        if "flush" in json.dumps(r["messages"]) and "tool_result" in json.dumps(r["messages"][-1])
    )
    results = [b for b in flush_end["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [bool(b.get("is_error")) for b in results] == [True, True, True, False]


async def test_summary_replaces_old_turns_and_recent_turns_stay_verbatim(
    anthropic_server, make_gateway, tmp_path
):
    _, channel, model = await _gateway(anthropic_server, make_gateway)
    for n in range(6):
        await _say(channel, f"old message {n} " + "x" * 1_500, n + 1)
    model.usage = 8_500
    await _say(channel, "recent question", 7)
    await _say(channel, "latest", 9)
    request = anthropic_server.requests[-1]
    first = json.dumps(request["messages"][0])
    assert SUMMARY_HEADER in first and "Gate code 4711" in first
    everything = json.dumps(request["messages"])
    assert "old message 0" not in everything
    assert "latest" in everything

    # The transcript still has every original line, and a restart rebuilds the same history.
    transcript = next((tmp_path / "workspaces" / "fakechat-ana" / "sessions").glob("*.jsonl"))
    assert "old message 0" in transcript.read_text()
    _, channel2, _ = await _gateway(anthropic_server, make_gateway)
    await channel2.inject("ana", "after restart")
    await channel2.wait_for(1)
    again = anthropic_server.requests[-1]["messages"]
    assert SUMMARY_HEADER in json.dumps(again[0])
    assert "old message 0" not in json.dumps(again)


async def test_failed_summary_falls_back_without_stalling(anthropic_server, make_gateway):
    _, channel, model = await _gateway(anthropic_server, make_gateway)
    model.summaries = ["I refuse to use headings."]
    for n in range(4):
        await _say(channel, f"old {n} " + "y" * 2_000, n + 1)
    model.usage = 8_500
    await _say(channel, "now", 5)
    await _say(channel, "and now", 7)
    texts = channel.texts()
    assert model.kinds.count("summary") == 2  # checked, retried once, then fell back
    assert "set its oldest messages aside" in texts[5]
    assert texts[6].startswith("echo:")
    assert "old 0" not in json.dumps(anthropic_server.requests[-1]["messages"])


async def test_summary_timeout_falls_back(anthropic_server, make_gateway):
    _, channel, model = await _gateway(
        anthropic_server, make_gateway, compaction={"timeout_seconds": 0.3}
    )
    for n in range(4):
        await _say(channel, f"old {n} " + "z" * 2_000, n + 1)

    original = model.__call__

    def slow_summaries(body: dict[str, Any]) -> Any:
        reply = original(body)
        if model.kinds[-1] == "summary":
            from dataclasses import replace

            return replace(reply, delay=2.0)
        return reply

    anthropic_server.responder = slow_summaries
    model.usage = 8_500
    await _say(channel, "now", 5)
    await _say(channel, "go on", 7)
    assert "set its oldest messages aside" in channel.texts()[5]


async def test_context_overflow_recovers_and_answers(anthropic_server, make_gateway):
    _, channel, model = await _gateway(anthropic_server, make_gateway)
    for n in range(4):
        await _say(channel, f"old {n} " + "w" * 2_000, n + 1)
    model.overflow_next = 1
    await _say(channel, "does this fit?", 6)
    assert "overflow" in model.kinds and "summary" in model.kinds
    assert model.kinds[-1] == "turn"
    assert channel.texts()[-1].startswith("echo:")


async def test_persistent_overflow_ends_with_a_clear_message(anthropic_server, make_gateway):
    _, channel, model = await _gateway(anthropic_server, make_gateway)
    for n in range(4):
        await _say(channel, f"old {n} " + "v" * 2_000, n + 1)
    model.overflow_next = 10
    texts = await _say(channel, "too big", 5)
    while len(texts) < 5 or "/compact" not in texts[-1]:
        texts = await channel.wait_for(len(texts) + 1)
        texts = [m.text for m in texts]
    assert "/new" in texts[-1]
    model.overflow_next = 0
    await channel.inject("ana", "/new")
    await channel.inject("ana", "fresh start")
    sent = await channel.wait_for(len(texts) + 2)
    assert sent[-1].text.startswith("echo:")


async def test_compact_command_and_status(anthropic_server, make_gateway):
    _, channel, _ = await _gateway(anthropic_server, make_gateway)
    await _say(channel, "/compact", 1)
    assert "Nothing to compact" in channel.texts()[0]
    for n in range(4):
        await _say(channel, f"topic {n} " + "u" * 2_000, n + 2)
    await _say(channel, "/compact focus on the tent", 6)
    assert channel.texts()[5].startswith("Compacted: ")
    summary_request = next(
        r for r in anthropic_server.requests if "You compress" in json.dumps(r.get("system"))
    )
    assert "focus on the tent" in json.dumps(summary_request)
    await _say(channel, "/status", 7)
    assert "compactions: 1" in channel.texts()[6]


def test_cut_never_separates_a_tool_call_from_its_result():
    call = ToolCall("c1", "read_file", {"path": "a.md"})
    history = [
        Message("user", "q1 " + "a" * 400),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "r" * 4_000, tool_call_id="c1", tool_name="read_file"),
        Message("assistant", "answer"),
        Message("user", "q2"),
    ]
    for keep in range(1, 2_000, 37):
        cut = choose_cut(history, keep)
        assert history[cut].role != "tool"
        assert cut <= len(history) - 1
    assert choose_cut(history, 10) == 4  # lands on the person's message


def test_summary_validation():
    assert summary_is_valid(GOOD_SUMMARY)
    assert not summary_is_valid(GOOD_SUMMARY.replace("## Exact identifiers", ""))
    assert not summary_is_valid(
        "\n".join(
            f"## {h}"
            for h in (
                "Decisions",
                "Open tasks",
                "Constraints and rules",
                "Pending requests",
                "Exact identifiers",
            )
        )
    )


async def test_a_compacted_detail_is_found_again_through_memory_search(
    anthropic_server, make_gateway
):
    from memory.service import MemoryOptions, MemoryService
    from tests.fakes.embedder import FakeEmbedder

    service = MemoryService(lambda: FakeEmbedder(), MemoryOptions(watch=False))
    _, channel, model = await _gateway(anthropic_server, make_gateway, memory_service=service)
    await _say(channel, "my locker code at the gym is 8812, remember it " + "p" * 2_000, 1)
    for n in range(3):
        await _say(channel, f"other topic {n} " + "q" * 2_000, n + 2)
    model.usage = 8_500
    await _say(channel, "let us continue", 5)
    model.usage = 100  # the session is small again after the compaction
    await _say(channel, "what was my locker code?", 7)
    assert "8812" not in json.dumps(anthropic_server.requests[-1]["messages"])  # compacted away

    anthropic_server.responder = None
    anthropic_server.reply_tool_call("memory_search", {"query": "gym locker code"})
    anthropic_server.reply_text("It is 8812.")
    await _say(channel, "please look it up", 8)
    results = json.dumps(anthropic_server.requests[-1]["messages"][-1])
    assert "8812" in results and "sessions/" in results
    assert channel.texts()[-1] == "It is 8812."
    await service.close()
