"""The panel as a new user met it, one test per complaint: no reminders page,
unreadable charts, routine notices as "errors", bookkeeping rows in transcripts, an unstyled
"no such person", search without the answering line marked."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from gateway.agent.sessions import transcript_path
from gateway.panel.html import CHAR_PX, FONT_PX, bar_chart
from scheduler import list_jobs


def _ws(rig, person="owner"):
    return rig.gateway.settings.workspaces_dir / person


def _log(workspace) -> str:
    return subprocess.run(
        ["git", "-C", str(workspace), "log", "--format=%s"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


async def test_reminders_page_lists_adds_and_cancels_through_the_schedule_desk(rig):
    csrf = await rig.login()
    gateway = rig.gateway
    page = await (await rig.client.get("/p/owner/reminders")).text()
    assert "No reminders or scheduled tasks." in page and 'href="/p/owner/reminders"' in page

    added = await rig.post(
        "/p/owner/reminders/add", {"when": "tomorrow 9am", "text": "Send the invoice"}, csrf
    )
    assert added.status == 303 and added.headers["Location"] == "/p/owner/reminders"
    page = await (await rig.client.get("/p/owner/reminders")).text()
    assert "Scheduled reminder #1: &#39;Send the invoice&#39;" in page  # the tool's words
    assert "Send the invoice" in page and "in " in page and "(UTC)" in page
    # The same list `clawgate schedule list` and the tools read, committed as a schedule change.
    views, _ = list_jobs(_ws(rig), gateway.settings.zone_of("owner"))
    assert [(v.job.id, v.job.text) for v in views] == [(1, "Send the invoice")]
    assert views[0].next_run.astimezone(UTC).hour == 9
    assert "schedule: " in _log(_ws(rig))

    await rig.post(
        "/p/owner/reminders/add",
        {"when": "every weekday at 8:30", "text": "Stand-up", "agent": "1"},
        csrf,
    )
    page = await (await rig.client.get("/p/owner/reminders")).text()
    assert "every weekday at 8:30" in page and "task for the assistant" in page

    # A time it does not take: said why, and the form keeps what was typed.
    refused = await rig.post(
        "/p/owner/reminders/add", {"when": "when pigs fly", "text": "Buy wings"}, csrf
    )
    assert refused.status == 400
    text = await refused.text()
    assert "Not added:" in text and 'value="when pigs fly"' in text and 'value="Buy wings"' in text

    cancelled = await rig.post("/p/owner/reminders/cancel", {"id": "1"}, csrf)
    assert cancelled.status == 303
    page = await (await rig.client.get("/p/owner/reminders")).text()
    assert "Cancelled #1: Send the invoice" in page
    views, _ = list_jobs(_ws(rig), gateway.settings.zone_of("owner"))
    assert [v.job.text for v in views] == ["Stand-up"]
    await rig.post("/p/owner/reminders/cancel", {"id": "7"}, csrf)
    assert "There is no reminder #7" in await (await rig.client.get("/p/owner/reminders")).text()
    # Another person's list is their own.
    other = await (await rig.client.get("/p/telegram-42/reminders")).text()
    assert "Stand-up" not in other


@pytest.mark.parametrize("rig", [{"scheduler": False}], indirect=True)
async def test_reminders_page_says_when_reminders_are_off(rig):
    await rig.login()
    page = await (await rig.client.get("/p/owner/reminders")).text()  # no schedule desk
    assert "Reminders are off" in page


def test_chart_labels_never_overlap_and_the_top_value_fits():
    days = [
        ((datetime(2026, 11, 17) + timedelta(days=n)).date().isoformat(), float(n * 997))
        for n in range(14)
    ]
    chart = bar_chart(days, "Tokens per day")
    ticks = [(b.tick_x, len(b.tick) * CHAR_PX) for b in chart.bars if b.tick]
    assert 4 <= len(ticks) < 14 and chart.bars[-1].tick == "11-30"  # the newest is labelled
    for (x1, w1), (x2, w2) in itertools.pairwise(ticks):
        assert x2 - x1 >= (w1 + w2) / 2, "two date labels overlap"
    printed = [b for b in chart.bars if b.value]
    for a, b in itertools.pairwise(printed):
        assert b.value_x - a.value_x >= (len(a.value) + len(b.value)) * CHAR_PX / 2
    top = max(chart.bars, key=lambda b: b.height)
    assert top.value == "12,961"  # printed, and inside the picture
    assert top.y - 3 - FONT_PX >= 0
    assert top.value_x + len(top.value) * CHAR_PX / 2 <= chart.width
    for b in chart.bars:
        assert b.tick_x - len(b.tick) * CHAR_PX / 2 >= 0
        assert b.tick_x + len(b.tick) * CHAR_PX / 2 <= chart.width


async def test_transcripts_leave_out_delivery_bookkeeping_but_show_failures(rig):
    await rig.login()
    path = transcript_path(_ws(rig), "owner:dm")
    lines = [
        {"type": "session", "key": "owner:dm"},
        {"ts": "2026-11-02T10:00:00+00:00", "type": "user", "text": "hello"},
        {"ts": "2026-11-02T10:00:01+00:00", "type": "assistant", "text": "hi there"},
        {"ts": "2026-11-02T10:00:02+00:00", "type": "delivery", "ok": True, "channel": "telegram"},
        {"ts": "2026-11-02T10:01:00+00:00", "type": "user", "text": "again"},
        {"ts": "2026-11-02T10:01:01+00:00", "type": "assistant", "text": "still here"},
        {
            "ts": "2026-11-02T10:01:02+00:00",
            "type": "delivery",
            "ok": False,
            "channel": "telegram",
            "error": "Forbidden: bot was blocked by the user",
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    page = await (await rig.client.get(f"/p/owner/session/{path.name}")).text()
    assert "ok=True" not in page and "delivery" not in page.split("<main>")[1]
    assert page.count('class="msg event') == 1
    assert "reply not delivered: Forbidden: bot was blocked by the user (telegram)" in page
    assert 'class="msg event problem"' in page


async def test_unknown_people_and_pages_get_a_styled_error(rig):
    await rig.login()
    for url in (
        "/p/nobody/files",
        "/p/nobody/reminders",
        "/p/owner/nope",
        "/p/owner/file?path=missing.md",
        "/p/owner/session/nope.jsonl",
    ):
        response = await rig.client.get(url)
        assert response.status == 404, url
        assert response.content_type == "text/html", url
        page = await response.text()
        assert '<link rel="stylesheet" href="/static/panel.css">' in page, url
        assert "<h1>" in page and "Not found" in page and 'class="card error-card"' in page
        assert "Log out" in page  # the panel's own layout, with the way back
    nobody = await (await rig.client.get("/p/nobody/files")).text()
    assert "There is no such person here" in nobody and 'href="/"' in nobody
    # A person this login may not see reads exactly like one that does not exist.
    missing = await (await rig.client.get("/p/owner/file?path=missing.md")).text()
    assert "There is no file missing.md in owner&#39;s workspace." in missing
    assert 'href="/p/owner/files"' in missing
    # htmx fragments and logged-out requests are unchanged.
    rig.client.session.cookie_jar.clear()
    assert (await rig.client.get("/p/nobody/files", allow_redirects=False)).status == 303


async def test_search_marks_the_line_that_answers(rig):
    await rig.login()
    (_ws(rig) / "memory" / "2026-11-02.md").write_text(
        "# 2026-11-02\n- Went to the market in the morning.\n"
        "- Adopted a grey cat called Miso from the shelter.\n- Booked the dentist.\n",
        encoding="utf-8",
    )
    page = await (await rig.client.get("/p/owner/search", params={"q": "cat Miso"})).text()
    marked = re.findall(r"<mark[^>]*>(.*?)</mark>", page)
    assert marked == ["- Adopted a grey cat called Miso from the shelter."]
    assert "<span>- Booked the dentist.</span>" in page  # the rest of the passage, unmarked
