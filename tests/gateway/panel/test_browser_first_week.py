"""The panel after a first week (issue 38), in headless chromium: people by their names, a
History that is not mostly reminder bookkeeping, diffs as changed lines of the file, and the
reminder form taking "in 3 days at 18:00".

Before: the overview listed `telegram-5150`, the History's rows were `.clawgate-schedule.json`
commits, a diff showed git's `commit`/`index`/`@@` lines and an unchanged last line as removed
and added again ("\\ No newline at end of file"), and the form refused the time ("not an
amount of time"). Screenshots go to this test's temporary folder (`--basetemp` keeps them).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.pipeline.pairing import Pairing
from tests.gateway.panel.test_browser import ARGS, CHROMIUM, STRANGER, pytestmark, running

__all__ = ["pytestmark", "running"]  # the skip rule and the fixture of the owner's session test


async def _a_week_of_history(gateway: Any, owner: Path) -> None:
    """MEMORY.md without its final newline, then a fact added under it (git's no-newline
    churn), with reminder bookkeeping commits in between, as a week of use leaves them."""
    versioning = gateway.versioning
    memory = owner / "MEMORY.md"
    memory.write_text("# Memory\n- Alex takes sencha tea, one sugar", encoding="utf-8")
    await versioning.commit(owner, "turn", note="a fact")
    for number in range(4):
        (owner / ".clawgate-schedule.json").write_text(
            f'{{"version": 1, "jobs": [], "n": {number}}}\n', encoding="utf-8"
        )
        await versioning.commit(owner, "turn", note="a reminder fired")
    memory.write_text(
        "# Memory\n- Alex takes sencha tea, one sugar\n- Has a cat called Miso.\n", encoding="utf-8"
    )
    await versioning.commit(owner, "turn", note="another fact")


@pytest.mark.timeout(300)
async def test_names_history_and_time_phrases_in_a_real_browser(
    running: Any, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    from gateway.panel.auth import issue_link_code

    assert CHROMIUM is not None, "CLAWGATE_REQUIRE_BROWSER is set but chromium is missing"
    gateway, panel, tg, _ = running
    owner = gateway.settings.workspaces_dir / "owner"
    shots = tmp_path / "shots"
    shots.mkdir()
    (owner / "USER.md").write_text(
        "# USER.md\n- Name: Alex\n- Time zone: Europe/Berlin\n", encoding="utf-8"
    )
    await _a_week_of_history(gateway, owner)
    # Rosa writes on Telegram and is approved: her workspace is telegram-5150.
    await tg.send_text(STRANGER, "hello, can we talk?", first_name="Rosa")
    code = (await tg.wait_sent(1))[0].text.split("code is ")[1].split(" ")[0]
    await Pairing(gateway.state).approve("telegram", code)
    await tg.wait_sent(3)  # welcomed, and her waiting message answered
    person = f"telegram-{STRANGER}"

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = await (await browser.new_context(viewport={"width": 1100, "height": 900})).new_page()
        base = panel.url
        login = issue_link_code(panel.panel.auth.state_dir, 600)
        await page.goto(f"{base}/login/link?code={login}")
        await expect(page.locator("h1")).to_have_text("Overview")

        # People by name, their id beside it in grey.
        people = page.locator("section.card", has=page.locator("h2", has_text="People"))
        await expect(people.get_by_role("link", name="Rosa")).to_have_attribute(
            "href", f"/p/{person}/files"
        )
        await expect(people.get_by_role("link", name="Alex")).to_have_attribute(
            "href", "/p/owner/files"
        )
        await expect(people.locator("tr", has_text="Rosa")).to_contain_text(person)
        await expect(
            page.locator("section.card", has=page.locator("h2", has_text="Approved"))
        ).to_contain_text(f"Rosa telegram:{STRANGER}")
        await page.screenshot(path=str(shots / "overview.png"), full_page=True)
        await page.goto(f"{base}/p/{person}/sessions")
        await expect(page.locator("main > h1 .who")).to_have_text("Rosa")

        # History: bookkeeping folded away; the diff is the file's changed lines.
        await page.goto(f"{base}/p/owner/history")
        await expect(page.locator("#folded")).to_contain_text("4 bookkeeping changes")
        rows = page.locator("tbody tr")
        assert await rows.count() >= 2
        for text in await rows.all_inner_texts():
            assert ".clawgate-schedule.json" not in text
        newest = rows.first
        await expect(newest).to_contain_text("turn: MEMORY.md")
        await newest.get_by_role("link", name="diff").click()
        shown = newest.locator("pre.diff")
        await expect(shown.locator(".add")).to_have_count(1)
        await expect(shown.locator(".add")).to_contain_text("+ - Has a cat called Miso.")
        await expect(shown.locator(".add .ln")).to_have_text("3")
        await expect(shown.locator(".del")).to_have_count(0)  # the unchanged fact stays put
        await expect(shown.locator(".same").last).to_contain_text("Alex takes sencha tea")
        whole = await newest.inner_text()
        for git_words in ("No newline", "index ", "@@", "diff --git", "+++", "commit "):
            assert git_words not in whole, git_words
        await page.screenshot(path=str(shots / "history.png"), full_page=True)
        await page.get_by_role("link", name="Show every change").click()
        await expect(page.locator("tbody tr", has_text=".clawgate-schedule.json")).to_have_count(4)

        # The reminder form reads the combinations people type.
        await page.goto(f"{base}/p/owner/reminders")
        await page.get_by_label("When").fill("in 3 days at 18:00")
        await page.get_by_label("What").fill("Water the plants")
        await page.get_by_role("button", name="Add").click()
        await expect(page.locator(".flash")).to_contain_text("Scheduled reminder #1")
        await expect(page.locator("tbody tr")).to_contain_text("18:00")
        await page.screenshot(path=str(shots / "reminders.png"), full_page=True)
        await browser.close()
    await asyncio.sleep(0)
