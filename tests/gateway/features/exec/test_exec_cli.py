"""The exec tool as a person meets it from a shell: `clawgate chat` asking on its own line,
and `clawgate doctor` saying why commands cannot run. Real processes, the fake model."""

from __future__ import annotations

import json

from tests.gateway.cli.test_cli import _env, _run


async def test_the_terminal_chat_asks_on_its_own_line_and_runs_what_is_approved(
    tmp_path, anthropic_server, sandbox_works
):
    env = _env(
        tmp_path, ANTHROPIC_API_KEY="sk-test-cli", CLAWGATE_LLM__BASE_URL=anthropic_server.base_url
    )
    anthropic_server.reply_tool_call("exec", {"command": "echo from-the-sandbox | tr a-z A-Z"})
    anthropic_server.reply_text("it printed FROM-THE-SANDBOX")
    code, out, err = await _run(["chat"], env, stdin="shout it\n1\n")
    assert code == 0, err
    assert "Run this command for you?" in out and "echo from-the-sandbox | tr a-z A-Z" in out
    assert "[1] Run once" in out and "[3] Deny" in out
    assert "Approved: it runs once." in out
    assert "assistant> it printed FROM-THE-SANDBOX" in out
    results = [
        block
        for message in anthropic_server.requests[-1]["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert "FROM-THE-SANDBOX" in json.dumps(results)


async def test_the_terminal_chat_deny_line(tmp_path, anthropic_server, sandbox_works):
    env = _env(
        tmp_path, ANTHROPIC_API_KEY="sk-test-cli", CLAWGATE_LLM__BASE_URL=anthropic_server.base_url
    )
    anthropic_server.reply_tool_call("exec", {"command": "touch notes/x; echo done"})
    anthropic_server.reply_text("not run then")
    code, out, err = await _run(["chat"], env, stdin="make x\n3\n")
    assert code == 0, err
    assert "Denied: it does not run." in out and "assistant> not run then" in out
    assert not (tmp_path / "workspaces" / "owner" / "notes" / "x").exists()


async def test_doctor_says_why_commands_cannot_run_and_what_to_do(tmp_path, anthropic_server):
    env = _env(
        tmp_path,
        ANTHROPIC_API_KEY="sk-x",
        CLAWGATE_LLM__BASE_URL=anthropic_server.base_url,
        CLAWGATE_EXEC__BWRAP="/nonexistent/bwrap",
    )
    code, out, _ = await _run(["doctor"], env)
    assert code == 1
    assert "FAIL the exec tool is not offered: bubblewrap (bwrap) is not installed" in out
    assert "apt-get install bubblewrap" in out


async def test_doctor_says_the_sandbox_works(tmp_path, anthropic_server, sandbox_works):
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-x", CLAWGATE_LLM__BASE_URL=anthropic_server.base_url)
    code, out, _ = await _run(["doctor"], env)
    assert code == 0, out
    assert "ok  the command sandbox works (bubblewrap" in out
