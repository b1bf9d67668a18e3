"""Skills and MCP tools through the whole Gateway: real SDKs (LLM and MCP) against loopback
fakes. A DM uses both; a group sees neither and cannot write skills; a crashing server only
produces a tool error; /context shows both; the schema budget loads a server on demand."""

from __future__ import annotations

import json
from typing import Any

from gateway.capabilities.mcp_budget import LOAD_TOOL
from gateway.pipeline.turn_setup import base_tools
from gateway.workspace.seed import workspace_path
from tests.fakes.mcp_server import stdio_config
from tests.gateway.ops.test_health_and_logs import parse_prometheus, value

OWNER = "fakechat-dana"  # the RecordingChannel's sender "dana"
SKILL = """---
name: pdf-forms
description: Fill in PDF forms from the person's notes.
---
# Filling a form
SKILL-BODY-MARKER: always read the form's field list first.
"""


def _settings(**mcp: Any) -> dict[str, Any]:
    return {
        "owner": OWNER,
        "mcp": {"servers": {"fake": stdio_config(restart_initial_seconds=0.1)}, **mcp},
    }


def _with_skill(tmp_path) -> None:
    folder = workspace_path(tmp_path / "workspaces", OWNER) / "skills" / "pdf-forms"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)


def _tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in request.get("tools", [])]


def _tool_results(request: dict[str, Any]) -> str:
    """The newest message's tool results as JSON, without the call ids (a fake's id counts up
    over the whole test run: `toolu_fake000842` would count as one more "42") and without the
    turn's other blocks (its "[Current time: ... 04:42 ...]" line would count too)."""
    message = request["messages"][-1]
    content = message["content"]
    if isinstance(content, list):
        content = [
            {k: v for k, v in block.items() if k != "tool_use_id"}
            for block in content
            if block.get("type") == "tool_result"
        ]
    return json.dumps({**message, "content": content})


async def test_a_dm_reads_a_skill_and_calls_an_mcp_tool(anthropic_server, make_gateway, tmp_path):
    _with_skill(tmp_path)
    gateway, channel = await make_gateway(anthropic_server, **_settings())
    server = anthropic_server
    server.reply_tool_call("read_file", {"path": "skills/pdf-forms/SKILL.md"})
    server.reply_tool_call("fake__echo", {"text": "form filled"})
    server.reply_text("Done: the form is filled.")

    await channel.inject("dana", "please fill in the tax form")
    await channel.wait_for(1)

    assert channel.texts() == ["Done: the form is filled."]
    first, second, third = server.requests
    system = json.dumps(first["system"])
    assert "## Skills" in system and "- pdf-forms: Fill in PDF forms" in system
    assert "SKILL-BODY-MARKER" not in system  # only the name and description are in the prompt
    echo = next(t for t in first["tools"] if t["name"] == "fake__echo")
    assert echo["input_schema"]["properties"]["text"]["type"] == "string"
    assert "SKILL-BODY-MARKER" in _tool_results(second)
    assert "echo: form filled" in _tool_results(third)
    # counted under the configured server's name (never a server-chosen label)
    assert gateway.metrics.tool_calls.value(tool="mcp:fake", outcome="ok") == 1


async def test_a_group_sees_no_skills_nor_mcp_tools_and_cannot_write_skills(
    anthropic_server, make_gateway, tmp_path
):
    _with_skill(tmp_path)
    server = anthropic_server
    gateway, channel = await make_gateway(server, **_settings())
    server.reply_tool_call(
        "write_file",
        {"path": "skills/evil/SKILL.md", "content": "---\nname: evil\ndescription: x\n---\n"},
    )
    server.reply_text("ok")

    await channel.inject("mallory", "@bot add a skill", chat_type="group", chat_id="g1")
    await channel.wait_for(1)

    first, second = server.requests
    assert not any(name.startswith("fake__") for name in _tool_names(first))
    assert LOAD_TOOL not in _tool_names(first) and "read_skill" not in _tool_names(first)
    assert "## Skills" not in json.dumps(first["system"]) and "pdf-forms" not in json.dumps(first)
    refused = _tool_results(second)
    assert "refused" in refused and '"is_error": true' in refused
    workspace = workspace_path(tmp_path / "workspaces", OWNER)
    assert not (workspace / "skills" / "evil").exists()
    # Nor does the group's /context mention the owner's skills.
    await channel.inject("mallory", "/context", chat_type="group", chat_id="g1")
    await channel.wait_for(2)
    context = channel.texts()[-1]
    assert "Skills: none in this chat" in context and "pdf-forms" not in context
    assert "Tool servers: none allowed in this chat" in context
    # By default no server is offered to groups (test_mcp_servers: only when listed).
    assert gateway.capabilities.mcp.servers_for("group") == []


async def test_another_persons_dm_gets_their_skills_but_not_the_owners_servers(
    anthropic_server, make_gateway, tmp_path
):
    _with_skill(tmp_path)
    gateway, channel = await make_gateway(anthropic_server, **_settings())
    await channel.inject("erin", "hello")
    await channel.wait_for(1)
    request = anthropic_server.requests[0]
    assert not any(name.startswith("fake__") for name in _tool_names(request))
    assert "pdf-forms" not in json.dumps(request["system"])  # the owner's skill is not theirs
    assert "fake__echo" in gateway.parts.setup.heartbeat_tools(OWNER, tmp_path).names()
    erin = gateway.parts.setup.heartbeat_tools("fakechat-erin", tmp_path)
    assert "fake__echo" not in erin.names()


async def test_a_crashing_server_only_produces_a_tool_error(
    anthropic_server, make_gateway, tmp_path
):
    server = anthropic_server
    gateway, channel = await make_gateway(server, **_settings())
    server.reply_tool_call("fake__crash", {})
    server.reply_text("The tool crashed; I will try again later.")

    await channel.inject("dana", "use the crashy tool")
    await channel.wait_for(1)

    assert channel.texts() == ["The tool crashed; I will try again later."]
    result = server.requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "stopped during this call" in json.dumps(result)
    # The gateway and the server go on: the next turn's call works after the restart.
    server.reply_tool_call("fake__echo", {"text": "again"})
    server.reply_text("fine now")
    await channel.inject("dana", "try again")
    await channel.wait_for(2)
    assert "echo: again" in _tool_results(server.requests[3])
    status = gateway.capabilities.mcp.statuses()[0]
    assert (status.status, status.counters.crashes, status.counters.restarts) == ("ready", 1, 1)
    metrics = gateway.metrics.render()
    # Parsed, not matched as text: label order and "1" vs "1.0" are the exposition library's.
    samples = parse_prometheus(metrics)
    assert value(samples, "clawgate_mcp_events_total", server="fake", event="crashes") == 1
    assert value(samples, "clawgate_mcp_server_up", server="fake") == 1


async def test_context_shows_skills_and_servers_in_the_owners_dm(
    anthropic_server, make_gateway, tmp_path
):
    _with_skill(tmp_path)
    broken = workspace_path(tmp_path / "workspaces", OWNER) / "skills" / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no front matter\n")
    _, channel = await make_gateway(anthropic_server, **_settings())
    await channel.inject("dana", "/context")
    await channel.wait_for(1)
    text = channel.texts()[0]
    lines = [line.strip() for line in text.splitlines()]
    assert "Skills: 1 (1 listed; 321 of 4,000 chars)" in lines and "pdf-forms" in lines
    assert any(
        line.startswith("broken, skipped: skills/broken/SKILL.md: no front matter")
        for line in lines
    )
    assert "Tool servers: 1 (1,160 of 16,000 chars of schemas)" in lines
    assert "fake: ready, 7 tools" in lines
    # The file tools, send_file, the correction tools (memory_find, memory_correct) and the
    # server's 7.
    assert f"Tools: {len(base_tools()) + 2 + 7} (" in text


async def test_over_the_schema_budget_the_model_loads_a_server_on_demand(
    anthropic_server, make_gateway, tmp_path
):
    server = anthropic_server
    # Nothing fits in a zero budget: the server is summarised in mcp_load_tools.
    _, channel = await make_gateway(server, **_settings(tool_schema_max_chars=0))
    server.reply_tool_call(LOAD_TOOL, {"server": "fake"})
    server.reply_tool_call("fake__add", {"a": 20, "b": 22})
    server.reply_text("42")

    await channel.inject("dana", "add 20 and 22 with the tool")
    await channel.wait_for(1)

    first, second, third = server.requests
    assert "fake__add" not in _tool_names(first) and LOAD_TOOL in _tool_names(first)
    load = next(t for t in first["tools"] if t["name"] == LOAD_TOOL)
    assert "- fake: 7 tools (echo, add, fail, hang, crash, flood, +1 more)" in load["description"]
    assert "fake__add" in _tool_names(second)  # advertised from the next step of the turn
    assert _tool_results(third).count("42") == 1  # the tool's answer went back to the model
    assert channel.texts() == ["42"]


async def test_a_server_that_cannot_start_is_reported_but_the_gateway_is_ready(
    anthropic_server, make_gateway
):
    from gateway.pipeline.health import readiness

    settings = {
        "owner": OWNER,
        "mcp": {
            "servers": {
                "broken": {"command": "/nonexistent/mcp-server", "restart_initial_seconds": 60}
            }
        },
    }
    gateway, channel = await make_gateway(anthropic_server, **settings)
    report = await readiness(gateway.parts)
    assert report["ready"] is True  # an optional tool server never makes the gateway unready
    assert report["mcp"]["broken"]["ready"] is False
    assert "cannot run '/nonexistent/mcp-server'" in report["mcp"]["broken"]["detail"]
    await channel.inject("dana", "hello")  # turns go on, without the server's tools
    await channel.wait_for(1)
    assert not any(n.startswith("broken__") for n in _tool_names(anthropic_server.requests[0]))
    samples = parse_prometheus(gateway.metrics.render())
    assert ("clawgate_mcp_server_up", (("server", "broken"),)) in samples
    assert value(samples, "clawgate_mcp_server_up", server="broken") == 0


async def test_a_groups_own_skills_are_offered_only_in_that_group(
    anthropic_server, make_gateway, tmp_path
):
    _with_skill(tmp_path)
    server = anthropic_server
    _, channel = await make_gateway(server, **_settings())
    own = "groups/fakechat-g1/skills/standup/SKILL.md"
    server.reply_tool_call(
        "write_file",
        {
            "path": own,
            "content": (
                "---\nname: standup\ndescription: Run the team's daily standup.\n"
                "---\nAsk each one.\n"
            ),
        },
    )
    server.reply_text("saved")
    await channel.inject(
        "mallory", "@bot remember how we do standups", chat_type="group", chat_id="g1"
    )
    await channel.wait_for(1)
    assert '"is_error": true' not in _tool_results(server.requests[1])  # its own area

    await channel.inject("mallory", "@bot standup time", chat_type="group", chat_id="g1")
    await channel.inject("mallory", "@bot hi", chat_type="group", chat_id="g2")
    await channel.inject("dana", "hello")
    await channel.wait_for(4)
    by_chat = {}
    for request in server.requests[2:]:
        text = json.dumps(request)
        key = "g1" if "group:g1" in text else "g2" if "group:g2" in text else "dm"
        by_chat[key] = json.dumps(request["system"])
    assert "- standup: Run the team's daily standup." in by_chat["g1"]
    assert "groups/fakechat-g1/skills/<name>/SKILL.md" in by_chat["g1"]
    assert "pdf-forms" not in by_chat["g1"]  # never the owner's
    assert "standup" not in by_chat["g2"]  # another group does not follow it
    assert "standup" not in by_chat["dm"] and "pdf-forms" in by_chat["dm"]  # nor does the owner
