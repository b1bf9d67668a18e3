"""A hand-edited (or hostile) session transcript loses its bad lines, never the session.

On main a line nested thousands deep raised RecursionError out of the loader, and an
assistant entry whose tool_calls was a string raised AttributeError: the session could not
be opened, so every later message in that chat failed."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from gateway.agent.sessions import SessionStore, transcript_path
from gateway.clock import FixedClock
from gateway.workspace.seed import workspace_path
from memory.layout import dm_session_key
from tests.gateway.capabilities.test_capabilities_gateway import OWNER

GOOD = [
    {"type": "session", "key": "k"},
    {"type": "user", "text": "hello"},
    {"type": "assistant", "text": "hi there"},
]
HOSTILE = [
    "[" * 100_000,
    '{"type": "user", "text": ' + "9" * 5_000 + "}",
    '{"type": "assistant", "text": "x", "tool_calls": "not a list"}',
    '{"type": "assistant", "text": "x", "tool_calls": [{"id": "1", "name": "f", '
    '"arguments": [1, 2]}]}',
    '{"type": "assistant", "text": "x", "tool_calls": ["just text"]}',
    '{"type": "user", "text": "x", "usage": {"input_tokens": 1e300}}',
    '{"type": "compaction", "first_kept_entry": "abc", "summary": "s"}',
    '{"type": "flush", "cycle": [1]}',
    '{"type": "tool_result", "text": {"a": 1}, "tool_call_id": "1"}',
    '{"type": "user", "text": "\\ud800"}',
]


def _write(path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        for line in lines:
            handle.write(line.encode("utf-8") + b"\n")
        handle.write(b'{"type": "user", "text": "\xff\xfe"}\n')  # invalid UTF-8


async def test_hostile_lines_are_skipped_and_the_session_opens(tmp_path, caplog) -> None:
    store = SessionStore(FixedClock(datetime(2026, 3, 2, tzinfo=UTC)))
    path = transcript_path(tmp_path, "k")
    _write(path, [json.dumps(e) for e in GOOD[:2]] + HOSTILE + [json.dumps(GOOD[2])])
    caplog.set_level(logging.WARNING)
    session = await store.get(tmp_path, "k")
    assert [(m.role, m.text) for m in session.history] == [
        ("user", "hello"),
        ("assistant", "hi there"),
    ]
    # One warning each from the reader and the replay, not one per line.
    assert len([r for r in caplog.records if path.name in r.getMessage()]) == 2


async def test_a_dm_with_a_hostile_transcript_is_still_answered(
    anthropic_server, make_gateway, tmp_path
) -> None:
    workspace = workspace_path(tmp_path / "workspaces", OWNER)
    _write(
        transcript_path(workspace, dm_session_key(OWNER)), [json.dumps(e) for e in GOOD] + HOSTILE
    )
    anthropic_server.reply_text("still here")
    _, channel = await make_gateway(anthropic_server, owner=OWNER)
    await channel.inject("dana", "are you there?")
    await channel.wait_for(1)
    assert channel.texts() == ["still here"]
    sent = json.dumps(anthropic_server.requests[-1]["messages"])
    assert "hi there" in sent and "are you there?" in sent
