"""Prompt size with 20 skills and 60 MCP tools, against the request budget.

A seeded workspace gets 20 skills (descriptions of typical length, 60-200 characters) and the
gateway gets six MCP servers of ten tools each, with schemas shaped like real servers' (a
description of ~180 characters, four described parameters: ~650 characters per tool). The
listings are set on the connections directly (no processes), so the figures are the real
wrapping, budgeting and prompt code. One DM turn goes through the real Anthropic SDK to the
loopback fake; the exact request body is measured, in four configurations:

  baseline         no skills, no servers
  skills only      20 skills
  all schemas      20 skills + 60 tools, no schema budget (tool_schema_max_chars = 1,000,000)
  budgeted         20 skills + 60 tools, the default budget (16,000 characters)

Tokens are ESTIMATED as characters / 4 (no tokenizer installed). Also printed: the per-skill
prompt cost, and the per-turn CPU cost of assembling skills section and tool registry.

    python bench/prompt_budget.py [--skills 20] [--servers 6] [--tools-per-server 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mcp_types as types

from gateway.agent.prompt import tool_schema_chars
from gateway.agent.providers import build_provider
from gateway.capabilities.skill_prompt import HEADER, render_skill_section
from gateway.config.settings import load_settings
from gateway.pipeline.gateway import Gateway
from gateway.workspace.seed import ensure_workspace
from tests.conftest import AllowAll
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import FakeAnthropicServer

OWNER = "fakechat-owner"
WORDS = (
    "calendar",
    "events",
    "notes",
    "invoices",
    "receipts",
    "travel",
    "plans",
    "recipes",
    "meeting",
    "minutes",
    "weekly",
    "review",
    "tasks",
    "reminders",
    "email",
    "drafts",
    "summaries",
    "contacts",
    "birthdays",
    "budget",
    "tracking",
    "reading",
    "list",
    "bookmarks",
    "research",
    "papers",
    "translations",
    "forms",
    "reports",
)


def skill_text(rng: random.Random, index: int) -> tuple[str, str]:
    name = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{index}"
    length = rng.randint(60, 200)
    words: list[str] = []
    while len(" ".join(words)) < length:
        words.append(rng.choice(WORDS))
    description = ("Use when the person asks about " + " ".join(words))[:length].rstrip() + "."
    body = "# Steps\n" + "\n".join(
        f"{i}. {' '.join(rng.choices(WORDS, k=12))}" for i in range(1, 30)
    )
    return name, f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


def tool_listing(rng: random.Random, server: int, count: int) -> list[types.Tool]:
    tools = []
    for index in range(count):
        props = {
            f"{rng.choice(WORDS)}_{p}": {
                "type": rng.choice(["string", "integer", "boolean"]),
                "description": " ".join(rng.choices(WORDS, k=8)).capitalize() + ".",
            }
            for p in range(4)
        }
        tools.append(
            types.Tool(
                name=f"{rng.choice(WORDS)}_{index}",
                description=(" ".join(rng.choices(WORDS, k=26)).capitalize() + ".")[:180],
                input_schema={
                    "type": "object",
                    "properties": props,
                    "required": list(props)[:2],
                    "additionalProperties": False,
                },
            )
        )
    return tools


async def measure(
    root: Path, skills: int, servers: int, per_server: int, budget: int | None
) -> dict[str, Any]:
    rng = random.Random(17)
    workspaces = root / f"ws-{skills}-{servers}-{budget}"
    workspace = ensure_workspace(workspaces, OWNER)
    for index in range(skills):
        name, text = skill_text(rng, index)
        (workspace / "skills" / name).mkdir(parents=True)
        path = workspace / "skills" / name / "SKILL.md"
        path.write_text(text)
        hour_ago = time.time() - 3600  # written long ago: a skill edited this second is
        os.utime(path, (hour_ago, hour_ago))  # re-read every turn (the racy window)
    mcp: dict[str, Any] = {"servers": {f"srv{s}": {"command": "unused"} for s in range(servers)}}
    if budget is not None:
        mcp["tool_schema_max_chars"] = budget
    async with FakeAnthropicServer() as llm:
        settings = load_settings(
            root / "none.toml",
            workspaces_dir=workspaces,
            owner=OWNER,
            timezone="UTC",
            llm={
                "provider": "anthropic",
                "base_url": llm.base_url,
                "api_key": "sk-bench-000000",
                "max_attempts": 1,
            },
            mcp=mcp,
            versioning={"enabled": False},
        )
        channel = RecordingChannel()
        gateway = Gateway.build(
            settings, build_provider(settings), channels=[channel], access=AllowAll()
        )
        for s, connection in enumerate(gateway.capabilities.mcp.connections.values()):
            connection.tools = tool_listing(rng, s, per_server)  # never started: no process
        await gateway.start()
        try:
            await channel.inject("owner", "What is on my plate today?")
            await channel.wait_for(1)
            body = llm.requests[0]
            route = await gateway.router.resolve(_dm())
            started = time.perf_counter()
            rounds = 200
            for _ in range(rounds):
                gateway.parts.setup.tools_for(route).specs()
                gateway.capabilities.skill_section(route.workspace, "owner_dm")
            per_turn_us = (time.perf_counter() - started) / rounds * 1e6
        finally:
            await gateway.stop()
    system = json.dumps(body.get("system"))
    tools = json.dumps(body.get("tools", []))
    return {
        "request": len(json.dumps(body)),
        "system": len(system),
        "tools": len(tools),
        "advertised": len(body.get("tools", [])),
        "per_turn_us": per_turn_us,
        "window": settings.llm.context_window,
    }


def _dm():  # type: ignore[no-untyped-def]
    from channels.base import InboundMessage

    return InboundMessage(
        channel="fakechat",
        chat_id="owner",
        sender_id="owner",
        text="x",
        chat_type="direct",
        message_id="",
    )


def per_skill_cost(count: int) -> tuple[float, int]:
    rng = random.Random(17)
    from gateway.capabilities.skill_file import Skill

    skills = []
    for index in range(count):
        name, text = skill_text(rng, index)
        description = text.split("description: ", 1)[1].split("\n", 1)[0]
        skills.append(Skill(name, description, Path(name), "workspace"))
    section = render_skill_section(skills, max_chars=1_000_000, line_max_chars=160)
    return (section.chars - len(HEADER)) / count, len(HEADER)


async def main() -> None:
    logging.disable(logging.WARNING)  # the benchmark's servers are never meant to start
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--servers", type=int, default=6)
    parser.add_argument("--tools-per-server", type=int, default=10)
    args = parser.parse_args()
    n_tools = args.servers * args.tools_per_server
    rows = [
        ("baseline", 0, 0, None),
        (f"{args.skills} skills", args.skills, 0, None),
        (
            f"{args.skills} skills + {n_tools} tools, no budget",
            args.skills,
            args.servers,
            1_000_000,
        ),
        (
            f"{args.skills} skills + {n_tools} tools, default budget",
            args.skills,
            args.servers,
            None,
        ),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        results = [
            (label, await measure(Path(tmp), s, v, args.tools_per_server, b))
            for label, s, v, b in rows
        ]
    each, header = per_skill_cost(args.skills)
    sample = tool_listing(random.Random(17), 0, 10)
    from gateway.agent.conversation import ToolSpec

    per_tool = tool_schema_chars(
        [ToolSpec(t.name, t.description or "", t.input_schema) for t in sample]
    ) / len(sample)
    window = results[0][1]["window"]
    print(
        f"skills section: header {header} chars, ~{each:.0f} chars (~{each / 4:.0f} tokens) "
        "per skill"
    )
    print(f"tool schemas: ~{per_tool:.0f} chars (~{per_tool / 4:.0f} tokens) per synthetic tool")
    print(
        f"{'configuration':<42} {'request':>9} {'~tokens':>8} {'system':>8} {'tools':>8} "
        f"{'#tools':>6} {'% window':>8} {'build/turn':>10}"
    )
    base = results[0][1]["request"]
    for label, r in results:
        print(
            f"{label:<42} {r['request']:>9,} {r['request'] // 4:>8,} {r['system']:>8,} "
            f"{r['tools']:>8,} {r['advertised']:>6} {r['request'] / 4 / window:>8.1%} "
            f"{r['per_turn_us']:>8.0f}us"
        )
    over = results[2][1]["request"] - base
    saved = results[2][1]["request"] - results[3][1]["request"]
    print(
        f"skills + tools add ~{over // 4:,} tokens per request without a budget; the default "
        f"budget saves ~{saved // 4:,} of them (context window {window:,} tokens)"
    )


if __name__ == "__main__":
    asyncio.run(main())
