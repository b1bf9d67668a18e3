"""Hostile or odd input: no crash, a clear answer, nothing lost from the transcript."""

from __future__ import annotations

import json
import re

import pytest

from gateway.workspace.seed import workspace_path

INPUTS = {
    "empty": "",
    "whitespace": " \t\n  ",
    "huge": "lorem ipsum " * 8_334,  # 100,008 characters
    "nul and binary": "abc\x00\x01\x02\xff\ufffe def",
    "lone surrogates": "bad \ud800 half \udfff pairs",
    "control characters": "\x1b[31mred\x1b[0m \x07 bell \r\n crlf \x0b\x0c",
    "rtl and emoji": "\u202eمرحبا بالعالم\u202c 👩‍👩‍👧‍👦 🏳️‍🌈 עברית",
    "junk command args": "/status \x00\x00 ;rm -rf / $(reboot)",
    "command with huge args": "/compact " + "x" * 50_000,
    "unknown command": "/sudo make me a sandwich",
    "path-like text": "/etc/passwd is what?",
}


@pytest.mark.parametrize("name", list(INPUTS))
async def test_odd_input_gets_an_answer_and_is_kept(name, anthropic_server, make_gateway, tmp_path):
    _, channel = await make_gateway(anthropic_server)
    text = INPUTS[name]
    await channel.inject("rio", text)
    [reply] = await channel.wait_for(1, timeout=20)
    assert reply.text.strip()
    assert "Traceback" not in reply.text

    await channel.inject("rio", "and now a normal one")
    sent = await channel.wait_for(2, timeout=20)
    assert sent[1].text.endswith("and now a normal one")

    sessions = workspace_path(tmp_path / "workspaces", "fakechat-rio") / "sessions"
    lines = [
        json.loads(line)
        for path in sessions.glob("*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    users = [entry["text"] for entry in lines if entry.get("type") == "user"]
    assert users[-1] == "and now a normal one"
    if text.strip() and not text.startswith("/"):
        # What the person sent is on disk (lone surrogates replaced, nothing else changed).
        expected = re.sub("[\ud800-\udfff]", "\ufffd", text)
        assert users[0] == expected
