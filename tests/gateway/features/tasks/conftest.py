"""A scripted fake model that takes several steps per task, and a real gateway around it.

The fake Anthropic server answers by the request: a background task's request (its system
prompt names "A background task (number N)") gets `steps` tool calls (`list_files`), each
`delay` seconds late, then `RESULT-N` and the words asked for; a chat's request whose last
message starts with "task:" gets a `start_task` call with the rest as the goal, and the tool's
answer gets "STARTED: <the tool's text>"; anything else gets "echo: <text>".
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from gateway.assembly.builder import GatewayApp, Plan, assemble_parts
from gateway.stores.tasks import Task
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.llm_server import FakeAnthropicServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer

OWNER, OTHER = 42, 43
FAST = {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}
TASK = re.compile(r"A background task \(number (\d+)\)")
ASK = re.compile(r"(?:^|\s)task:\s*(.+)", re.DOTALL)  # "task: ..." (in a group, after a mention)
TOOLS = re.compile(r"\(tools=([^)]*)\)")
NOW = re.compile(r"\s*\[Current time: [^\]]*\]")  # what the gateway adds to a person's message
NO_CAP = {"default_token_cap": 10**8, "max_token_cap": 10**8}
PLAN = Plan(heartbeats=False, health=False, memory=False, panel=False, exclusive=False)


@dataclass
class Script:
    """How each task behaves: steps before the answer, seconds per step, the answer's words."""

    steps: int = 3
    delay: float = 0.02
    words: str = "all summed up"
    per_task: dict[int, tuple[int, float]] = field(default_factory=dict)  # number -> (steps, delay)
    tool: tuple[str, dict[str, Any]] = ("list_files", {"path": "."})  # what each step calls
    task_requests: int = 0

    def plan_for(self, number: int) -> tuple[int, float]:
        return self.per_task.get(number, (self.steps, self.delay))


def _tool_results(messages: list[dict[str, Any]]) -> int:
    return sum(
        1
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )


def _last_blocks(messages: list[dict[str, Any]]) -> tuple[str, str | None]:
    """The last message's text and, when it holds a tool result, that result's text."""
    content = messages[-1]["content"]
    if isinstance(content, str):
        return NOW.sub("", content), None
    for block in content:
        if block.get("type") == "tool_result":
            inner = block.get("content")
            return "", inner if isinstance(inner, str) else json.dumps(inner)
    text = " ".join(b.get("text", "") for b in content if b.get("type") == "text")
    return NOW.sub("", text), None


def responder(server: FakeAnthropicServer, script: Script) -> Callable[[dict[str, Any]], Reply]:
    def answer(body: dict[str, Any]) -> Reply:
        system = json.dumps(body.get("system", ""))
        messages = body["messages"]
        found = TASK.search(system)
        if found:
            script.task_requests += 1
            number = int(found.group(1))
            steps, delay = script.plan_for(number)
            done = _tool_results(messages)
            if done < steps:
                name, arguments = script.tool
                call = server.make_tool_calls([(name, arguments, f"t{number}s{done}")])
                return replace(call, delay=delay)
            return replace(server.make_text(f"RESULT-{number}: {script.words}"), delay=delay)
        text, result = _last_blocks(messages)
        if result is not None:
            return server.make_text(f"STARTED: {result}")
        asked = ASK.search(text)
        if asked:
            goal = asked.group(1).strip()
            args: dict[str, Any] = {"goal": goal}
            tools = TOOLS.match(goal)  # "(tools=a,b) goal": a subset of the chat's tools
            if tools:
                args = {"goal": goal[tools.end() :].strip(), "tools": tools.group(1).split(",")}
            return server.make_tool_calls([("start_task", args, "start-1")])
        return server.make_text(f"echo: {text.strip()}")

    return answer


@pytest.fixture
def script(anthropic_server: FakeAnthropicServer) -> Script:
    made = Script()
    anthropic_server.responder = responder(anthropic_server, made)
    return made


@pytest.fixture
async def make_app(
    make_settings: Callable[..., Any],
    anthropic_server: FakeAnthropicServer,
    tg: FakeTelegramServer,
    script: Script,
) -> AsyncIterator[Callable[..., Any]]:
    running: list[GatewayApp] = []

    async def make(
        tasks: dict[str, Any] | None = None,
        telegram_extra: dict[str, Any] | None = None,
        exec_settings: dict[str, Any] | None = None,
        llm_extra: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> GatewayApp:
        telegram = {
            "token": tg.token,
            "base_url": tg.base_url,
            "poll_timeout_seconds": 1,
            "allow_from": [str(OWNER), str(OTHER)],
            "streaming": False,
            **(telegram_extra or {}),
        }
        settings = make_settings(
            **llm_overrides(anthropic_server, **(llm_extra or {})),
            telegram=telegram,
            owner=f"telegram-{OWNER}",
            exec=exec_settings or {"enabled": False},
            # No cap unless a test sets one: a slow test must not end at the default cap.
            tasks={"poll_seconds": 0.1, **NO_CAP, **(tasks or {})},
            **overrides,
        )
        parts = assemble_parts(settings, PLAN, options={"telegram": FAST})
        app = GatewayApp(settings, PLAN, parts=parts)
        await app.start()
        running.append(app)
        return app

    yield make
    for app in running:
        await app.stop(grace=5)


def tasks_in(db_path: Path) -> list[Task]:
    """Every task row, read from another connection (what the CLI would see)."""
    from gateway.stores.tasks import _COLUMNS

    if not db_path.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM tasks ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    return [Task.from_row(r) for r in rows]


async def wait_for(check: Callable[[], Any], *, what: str, timeout: float = 30.0) -> Any:
    """Until `check()` is truthy (polled, sync or async); its value. Never a fixed sleep."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if loop.time() > end:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.02)


def finished_texts(tg: FakeTelegramServer, chat: int = OWNER) -> list[str]:
    return [s.text for s in tg.finished() if s.chat_id == str(chat)]
