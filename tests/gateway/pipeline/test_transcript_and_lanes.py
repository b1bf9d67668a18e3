"""Transcripts tolerate crashes; lanes keep order and survive a failing job."""

from __future__ import annotations

import asyncio
import json

from gateway.agent.conversation import Message, ToolCall
from gateway.agent.transcript import INTERRUPTED_TOOL_RESULT, Transcript, repair_history
from gateway.pipeline.lanes import Lanes


def test_a_torn_last_line_is_skipped_and_fenced(tmp_path):
    transcript = Transcript(tmp_path / "s.jsonl")
    transcript.append({"type": "user", "text": "kept"})
    with open(transcript.path, "ab") as handle:
        handle.write(b'{"type": "assistant", "te')  # the process died mid-write
    entries = transcript.load()
    assert entries == [{"type": "user", "text": "kept"}]
    transcript.append({"type": "user", "text": "after restart"})
    assert [e["text"] for e in transcript.load()] == ["kept", "after restart"]
    lines = transcript.path.read_text().splitlines()
    assert json.loads(lines[-1])["text"] == "after restart"


def test_tool_calls_without_results_get_an_interrupted_result():
    call = ToolCall("c1", "read_file", {"path": "x"})
    history = [
        Message("user", "hi"),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "orphan", tool_call_id="nope"),
        Message("user", "hello?"),
    ]
    repaired, ids = repair_history(history, list(range(len(history))))
    assert ids == [0, 1, -1, 3]
    assert [m.role for m in repaired] == ["user", "assistant", "tool", "user"]
    assert repaired[2].tool_call_id == "c1" and repaired[2].text == INTERRUPTED_TOOL_RESULT


async def test_lanes_keep_order_and_a_failure_does_not_stall():
    lanes = Lanes()
    done: list[str] = []

    async def job(name: str, fail: bool = False) -> None:
        await asyncio.sleep(0.01)
        if fail:
            raise RuntimeError("boom")
        done.append(name)

    futures = [
        lanes.submit("a", lambda: job("a1")),
        lanes.submit("a", lambda: job("a2", fail=True)),
        lanes.submit("a", lambda: job("a3")),
        lanes.submit("b", lambda: job("b1")),
    ]
    assert lanes.is_busy("a") and lanes.depth() == 4
    await lanes.drain()
    assert [d for d in done if d.startswith("a")] == ["a1", "a3"]
    assert "b1" in done
    assert futures[1].exception() is not None
    assert not lanes.is_busy("a") and lanes.depth() == 0
