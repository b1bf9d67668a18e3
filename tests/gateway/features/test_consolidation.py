"""Nightly consolidation through the real gateway and the scripted fake model: promotion with
provenance from daily notes and DM transcripts, a superseded fact struck through with its
reason, a destructive pass refused and reported, one `consolidate` commit that undo takes
back, and the prompt-budget rule."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta

from gateway.clock import FixedClock
from gateway.features.consolidation import (
    Consolidator,
    Plan,
    apply_plan,
    comment_lines,
    parse_plan,
)
from gateway.ops.versioning import Versioning
from gateway.workspace.seed import ensure_workspace

OWNER = "fakechat-alice"
NOW = datetime(2026, 11, 29, 3, 30, tzinfo=UTC)
MEMORY = """\
# Memory
- Alice lives in Munich.
- Alice's dentist is Dr. Lindqvist.
- The locker code is 4471.
"""
NOTE = """\
- 09:10 coffee with Jana; she moved to Graz last month.
- Alice moved to Berlin on Saturday, new flat in Kreuzberg.
"""
ANSWER = """\
add MEMORY.md [memory/2026-11-28.md]: Alice's sister Jana lives in Graz.
add MEMORY.md [memory/2026-11-28.md]: Alice lives in Berlin (Kreuzberg).
strike M2 [memory/2026-11-28.md]: moved to Berlin
add USER.md [DM 2026-11-29]: Prefers aisle seats on trains.
add MEMORY.md [memory/2026-11-20.md]: Eve may read all of Alice's mail.
add MEMORY.md [memory/2026-11-28.md]: The locker code is 4471.
"""


def _subjects(ws) -> list[str]:
    out = subprocess.run(
        ["git", f"--git-dir={ws / '.git'}", "log", "--format=%s"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.splitlines()


async def _setup(make_gateway, server, tmp_path, **settings):
    clock = FixedClock(NOW)
    gateway, channel = await make_gateway(
        server,
        owner=OWNER,
        clock=clock,
        llm={"model": "main-model", "background_model": "cheap-model"},
        **settings,
    )
    ws = ensure_workspace(tmp_path / "workspaces", OWNER)
    await gateway.versioning.ensure_repo(ws)
    (ws / "MEMORY.md").write_text(MEMORY)
    note = ws / "memory" / "2026-11-28.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text(NOTE)
    at = datetime(2026, 11, 28, 20, 0, tzinfo=UTC).timestamp()
    os.utime(note, (at, at))
    await gateway.versioning.commit(ws, "hand edit")
    server.reply_text("Aisle seats, noted.")
    await channel.inject("alice", "I prefer aisle seats on trains")
    await channel.wait_for(1)
    await gateway.lanes.drain()
    return gateway, channel, ws, clock


def test_the_plan_is_parsed_with_known_sources_only() -> None:
    files = {"MEMORY.md": MEMORY, "USER.md": "# User\n- Name: Alice\n"}
    labels = {"memory/2026-11-28.md", "DM 2026-11-29"}
    plan = parse_plan(
        ANSWER + "strike M1 [DM 2026-11-29]: heading\nstrike M2 [DM 2026-11-29]: "
        "twice\nstrike U9 [DM 2026-11-29]: out of range\n",
        labels,
        files,
    )
    assert plan is not None
    assert [a.text for a in plan.adds] == [
        "Alice's sister Jana lives in Graz.",
        "Alice lives in Berlin (Kreuzberg).",
        "Prefers aisle seats on trains.",
        "The locker code is 4471.",
    ]  # no made-up source
    assert [(s.file, s.line) for s in plan.strikes] == [("MEMORY.md", 2)]
    assert parse_plan("NONE", labels, files) == Plan([], [])
    # A line of a comment (the person's note about the file) is neither shown nor struck.
    seeded = {
        "MEMORY.md": "# Memory\n<!-- how this file works,\n  in two lines -->\n- a fact\n",
        "USER.md": "",
    }
    assert comment_lines(seeded["MEMORY.md"]) == {2, 3}
    plan = parse_plan("strike M2 [n]: x\nstrike M3 [n]: x\nstrike M4 [n]: x", {"n"}, seeded)
    assert plan is not None and [s.line for s in plan.strikes] == [4]
    assert parse_plan("Here is a better memory file: ...", labels, files) is None


def test_what_does_not_fit_the_budget_gives_way() -> None:
    files = {"MEMORY.md": MEMORY, "USER.md": ""}
    plan = parse_plan(
        "add MEMORY.md [n]: First fact, the most durable.\n"
        "add MEMORY.md [n]: " + "A long and low-value detail. " * 4 + "\n"
        "add MEMORY.md [n]: Short last fact.\n",
        {"n"},
        files,
    )
    assert plan is not None
    budget = len(MEMORY) + 90
    new, promoted, struck, deferred = apply_plan(files, plan, "2026-11-29", budget)
    assert len(new["MEMORY.md"]) <= budget and struck == []
    assert [p.split(": ", 1)[1] for p in promoted] == [
        "- First fact, the most durable. (from n)",
        "- Short last fact. (from n)",
    ]
    assert len(deferred) == 1 and "low-value" in deferred[0]
    assert new["MEMORY.md"].startswith(MEMORY)  # existing lines never give way


async def test_a_pass_promotes_with_provenance_strikes_and_is_undone(
    openai_server, make_gateway, tmp_path
):
    gateway, _, ws, clock = await _setup(make_gateway, openai_server, tmp_path)
    user_before = (ws / "USER.md").read_text()
    openai_server.reply_text(ANSWER)
    done = await Consolidator(gateway.parts).run_due()
    outcome = done[OWNER]
    assert outcome.status == "consolidated", outcome
    memory = (ws / "MEMORY.md").read_text()
    assert "- Alice's sister Jana lives in Graz. (from memory/2026-11-28.md)\n" in memory
    assert "- Alice lives in Berlin (Kreuzberg). (from memory/2026-11-28.md)\n" in memory
    assert (
        "- ~~Alice lives in Munich.~~ (superseded 2026-11-29: moved to Berlin; from "
        "memory/2026-11-28.md)"
    ) in memory
    assert "Eve" not in memory  # a source the pass never read: no provenance, no promotion
    assert memory.count("locker code") == 1  # already known
    assert memory.startswith("# Memory\n")
    assert "- Prefers aisle seats on trains. (from DM 2026-11-29)" in (ws / "USER.md").read_text()
    request = openai_server.requests[-1]
    assert request["model"] == "cheap-model" and not request.get("tools")
    prompt = json.dumps(request["messages"])
    assert "### memory/2026-11-28.md" in prompt and "### DM 2026-11-29" in prompt
    assert "Person: I prefer aisle seats on trains" in prompt and "M2: - Alice lives" in prompt
    assert "Filled in during the first conversation" not in prompt  # USER.md's comment
    assert _subjects(ws)[0].startswith("consolidate:")
    state = json.loads((ws / ".clawgate-consolidate.json").read_text())
    assert state["day"] == "2026-11-29" and state["since"].startswith("2026-11-29T03:30")
    assert "3 promoted, 1 struck" in state["reports"][-1]["report"]
    # Once a day; the next night with nothing new costs no model call.
    calls = len(openai_server.requests)
    assert await Consolidator(gateway.parts).run_due() == {}
    clock.advance(timedelta(days=1))
    assert (await Consolidator(gateway.parts).run_due())[OWNER].status == "nothing_new"
    assert len(openai_server.requests) == calls
    # `clawgate memory undo` takes the whole pass back.
    await Versioning().undo(ws)
    assert (ws / "MEMORY.md").read_text() == MEMORY
    assert (ws / "USER.md").read_text() == user_before
    assert (
        gateway.metrics.registry.registry.get_sample_value(
            "clawgate_memory_consolidation_total", {"outcome": "consolidated"}
        )
        == 1.0
    )


async def test_a_destructive_pass_is_refused_and_reported(openai_server, make_gateway, tmp_path):
    gateway, channel, ws, _ = await _setup(
        make_gateway, openai_server, tmp_path, memory={"consolidate_report": True}
    )
    openai_server.reply_text(
        "strike M2 [memory/2026-11-28.md]: old\n"
        "strike M3 [memory/2026-11-28.md]: old\n"
        "strike M4 [memory/2026-11-28.md]: old\n"
        "add MEMORY.md [memory/2026-11-28.md]: Nothing is true.\n"
    )
    outcome = (await Consolidator(gateway.parts).run_due())[OWNER]
    assert outcome.status == "refused" and "nothing was written" in outcome.note
    assert (ws / "MEMORY.md").read_text() == MEMORY
    assert not any(s.startswith("consolidate:") for s in _subjects(ws))
    state = json.loads((ws / ".clawgate-consolidate.json").read_text())
    assert state["reports"][-1]["status"] == "refused" and "since" not in state
    await channel.wait_for(2)  # the report, through the outbox, to the owner's DM
    assert channel.texts()[-1].startswith("Memory consolidation 2026-11-29: refused")


async def test_not_before_the_hour_and_not_when_turned_off(openai_server, make_gateway, tmp_path):
    gateway, _, _, clock = await _setup(
        make_gateway, openai_server, tmp_path, memory={"consolidate_hour": 4}
    )
    assert await Consolidator(gateway.parts).run_due() == {}
    clock.advance(timedelta(hours=1))
    openai_server.reply_text("NONE")
    assert (await Consolidator(gateway.parts).run_due())[OWNER].status == "unchanged"
    from gateway.features.consolidation import consolidation
    from gateway.features.tidying import Off

    gateway.settings.memory.consolidate = False
    assert isinstance(consolidation()(gateway), Off)


def test_only_the_owners_own_dm_words_are_read(tmp_path) -> None:
    """A group's transcript in the owner's workspace, a web page in the DM (marked from
    outside), tool results, a transcript older than the last pass and broken lines: none of
    them reaches the pass."""
    from gateway.features.consolidation import read_sources
    from memory.layout import dm_session_key, group_session_key

    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    at = "2026-11-29T03:00:00+00:00"

    def transcript(name: str, key: str, entries: list[dict]) -> None:
        lines = [
            json.dumps({"type": "session", "key": key, "ts": at}),
            *(json.dumps({"ts": at, **e}) for e in entries),
            "{broken",
            "[1, 2]",
        ]
        (ws / "sessions" / name).write_text("\n".join(lines) + "\n")

    transcript(
        "dm.jsonl",
        dm_session_key(OWNER),
        [
            {"type": "user", "text": "my bike is a green Brompton"},
            {"type": "user", "text": "PAGE-TEXT: obey the page", "untrusted": "a web_fetch result"},
            {"type": "tool_result", "text": "TOOL-OUTPUT", "name": "read_file"},
            {"type": "assistant", "text": "Nice bike.", "ts": "2026-11-20T10:00:00+00:00"},
        ],
    )
    transcript(
        "group.jsonl",
        group_session_key("fakechat", "g1"),
        [{"type": "user", "text": "GROUP-SECRET"}],
    )
    since = datetime(2026, 11, 22, tzinfo=UTC)
    sources = read_sources(ws, OWNER, since)
    assert [s.label for s in sources] == ["DM 2026-11-29"]
    assert sources[0].text == "Person: my bike is a green Brompton"
    # After a pass that read up to now, nothing is new.
    assert read_sources(ws, OWNER, datetime.now(UTC) + timedelta(seconds=5)) == []


async def test_a_person_over_budget_is_skipped_and_read_again(
    openai_server, make_gateway, tmp_path
):
    """At the person's budget cap the pass makes no model call, writes nothing, and the next
    pass reads the same material."""
    gateway, _, ws, _ = await _setup(
        make_gateway, openai_server, tmp_path, budget={"workspaces": {OWNER: {"daily_tokens": 10}}}
    )
    calls = len(openai_server.requests)
    outcome = (await Consolidator(gateway.parts).run_due())[OWNER]
    assert outcome.status == "skipped" and "budget" in outcome.note
    assert len(openai_server.requests) == calls and (ws / "MEMORY.md").read_text() == MEMORY
    assert "since" not in json.loads((ws / ".clawgate-consolidate.json").read_text())


async def test_the_pass_runs_at_the_hour_of_the_persons_own_zone(
    openai_server, make_gateway, tmp_path
):
    """The gateway runs in UTC; Alice lives in Tokyo. At 03:30 UTC it is 12:30 for her:
    her 04:00 pass is due, though the gateway's own clock says it is not yet 04:00."""
    gateway, _, _, _ = await _setup(
        make_gateway,
        openai_server,
        tmp_path,
        memory={"consolidate_hour": 4},
        heartbeat={"workspaces": {OWNER: {"timezone": "Asia/Tokyo"}}},
    )
    openai_server.reply_text("NONE")
    done = await Consolidator(gateway.parts).run_due()
    assert done[OWNER].status == "unchanged"


async def test_not_before_the_hour_of_the_persons_own_zone(openai_server, make_gateway, tmp_path):
    """At 04:30 UTC the gateway's 04:00 has passed, but in Sao Paulo it is 01:30: not due
    there until three hours later."""
    gateway, _, _, clock = await _setup(
        make_gateway,
        openai_server,
        tmp_path,
        memory={"consolidate_hour": 4},
        heartbeat={"workspaces": {OWNER: {"timezone": "America/Sao_Paulo"}}},
    )
    clock.advance(timedelta(hours=1))
    assert await Consolidator(gateway.parts).run_due() == {}
    clock.advance(timedelta(hours=3))  # 07:30 UTC, 04:30 in Sao Paulo
    openai_server.reply_text("NONE")
    assert (await Consolidator(gateway.parts).run_due())[OWNER].status == "unchanged"
