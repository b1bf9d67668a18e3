"""The Tasks tab in a real browser (Debian's headless chromium, Playwright), over a running
gateway with the real task runner: a person asks on the fake Telegram for a long job, the
model starts a task (`start_task`), the tab shows it running with its goal escaped, Cancel
stops it (the runner notices the flag) and the one report reaches the chat; then the page at
a phone's width fits. Skips only when chromium is missing (as test_browser.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.providers import build_provider
from gateway.assembly.builder import GatewayApp, Plan, assemble_parts
from gateway.panel.auth import issue_link_code
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.llm_server import FakeAnthropicServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.gateway.panel.test_browser import ARGS, CHROMIUM, NOT_FITTING, PHONE, TO_DOCS
from tests.settle import settled, until

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CLAWGATE_REQUIRE_BROWSER"),
    reason="chromium is not installed (apt-get install chromium; .ci/run does)",
)
USER = 7007
GOAL = "Compare <b>three</b> pages & write <script>alert('x')</script> a summary"
PLAN = Plan(heartbeats=False, health=False, exclusive=False)
STEP_SECONDS = 20.0  # a task's model call: long enough to be cancelled in the middle


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content if isinstance(b, dict))


def scripted(server: FakeAnthropicServer) -> Any:
    """The chat asks for a task and says it started; a task's calls are slow steps."""

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if _text(messages[0]["content"]).startswith("Your task"):
            return replace(server.make_text("still reading"), delay=STEP_SECONDS)
        last = messages[-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return server.make_text("I've started on it; I'll write when it's done.")
        return server.make_tool_calls([("start_task", {"goal": GOAL}, "call-1")])

    return respond


@pytest.fixture
async def running(make_settings: Any, anthropic_server: Any) -> AsyncIterator[Any]:
    async with FakeTelegramServer() as tg:
        section = {
            "token": tg.token,
            "base_url": tg.base_url,
            "poll_timeout_seconds": 1,
            "allow_from": [str(USER)],
        }
        settings = make_settings(
            **llm_overrides(anthropic_server, timeout_seconds=60),
            telegram=section,
            memory={"embedder": "none", "watch": False},
            tasks={"poll_seconds": 0.2},
            panel={"port": 0},
        )
        parts = assemble_parts(
            settings,
            PLAN,
            provider=build_provider(settings),
            options={"telegram": {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}},
        )
        # As `clawgate run` starts it: the task runner is one of the services around it.
        async with GatewayApp(settings, PLAN, parts=parts) as app:
            assert app.panel is not None
            yield app.gateway, app.panel, tg


@pytest.mark.timeout(240)
async def test_tasks_tab_shows_a_running_task_and_cancels_it(
    running: Any, anthropic_server: FakeAnthropicServer, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    assert CHROMIUM is not None, "CLAWGATE_REQUIRE_BROWSER is set but chromium is missing"
    gateway, panel, tg = running
    anthropic_server.responder = scripted(anthropic_server)
    person = f"telegram-{USER}"
    shots = Path(__file__).resolve().parents[3] / "docs" / "screenshots" if TO_DOCS else tmp_path
    shots.mkdir(parents=True, exist_ok=True)

    await tg.send_text(USER, "please compare those three pages for me")
    assert (await tg.wait_sent(1))[0].text.startswith("I've started on it")
    tasks = gateway.state.tasks
    found: list[Any] = []

    async def running_task() -> bool:
        found[:] = [t for t in await tasks.list_for(person) if t.state == "running"]
        return bool(found)

    async with asyncio.timeout(30):
        while not await running_task():
            await asyncio.sleep(0.05)
    await until(lambda: anthropic_server.in_flight >= 1, what="the task's first step")

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = await browser.new_context(viewport={"width": 1100, "height": 900})
        page = await context.new_page()
        base = panel.url
        await page.goto(f"{base}/login/link?code={issue_link_code(panel.panel.auth.state_dir, 60)}")
        await page.goto(f"{base}/p/{person}/tasks")
        await expect(page.locator("nav a.on")).to_have_text("Tasks")
        row = page.locator("#running tbody tr").first
        await expect(row).to_contain_text("running")
        # The goal is shown as text: its markup is neither rendered nor run.
        await expect(row.locator("td.wrap")).to_contain_text("<b>three</b> pages & write")
        assert await page.locator("#running td.wrap b").count() == 0
        await page.screenshot(path=str(shots / "tasks.png"), full_page=True)

        await row.get_by_role("button", name="Cancel").click()
        await expect(page.locator(".flash")).to_contain_text("stopping task #1")
        # The runner notices the flag and ends the task; its one report reaches the chat.
        report = (await tg.wait_sent(2, timeout=30))[1].text
        assert "#1" in report or "task 1" in report.lower(), report
        task = await tasks.by_number(person, 1)
        assert task is not None and task.state == "cancelled" and task.cancelled_by == "panel:owner"
        await settled(gateway.state)
        assert len(tg.sent) == 2  # one answer, one report: nothing more
        await page.reload()
        await expect(page.locator("#recent tbody tr").first).to_contain_text("cancelled")
        await expect(page.locator("#running")).to_contain_text("No task is running.")

        phone = await browser.new_context(
            viewport=PHONE, storage_state=await context.storage_state()
        )
        mobile = await phone.new_page()
        await mobile.goto(f"{base}/p/{person}/tasks")
        await expect(mobile.locator("main > h1")).to_be_visible()
        assert await mobile.evaluate(NOT_FITTING) == []
        await mobile.screenshot(path=str(shots / "tasks-phone.png"), full_page=True)
        await browser.close()
