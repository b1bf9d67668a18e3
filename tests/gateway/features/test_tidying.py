"""Daily MEMORY.md tidying through the real gateway and the scripted fake model: due at most
once a day and only when needed, on the background model, a `tidy` commit that undo takes
back, and refusals that write nothing."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta

from gateway.clock import FixedClock
from gateway.features.tidying import (
    Tidier,
    apply_ops,
    has_duplicates,
    lines_dropped,
    parse_answer,
)
from gateway.ops.versioning import Versioning
from gateway.workspace.seed import ensure_workspace

OWNER = "fakechat-alice"
MEMORY = """\
# Memory
- Alice likes tea.
- Alice likes tea.
- Alice's sister is Jana.
- Alice lives in Munich.
- Alice lives in Berlin since June.
- The locker code is 4471.
- On 2026-11-02 Alice spent the afternoon sorting photos from the trip.
- Alice prefers window seats.
- Alice's dentist is Dr. Lindqvist.
"""
TIDIED = """\
# Memory
- Alice likes tea.
- Alice's sister is Jana.
- ~~Alice lives in Munich.~~ (superseded 2026-11-29)
- Alice lives in Berlin since June.
- The locker code is 4471.
- Alice prefers window seats.
- Alice's dentist is Dr. Lindqvist.
"""
MOVED = "- On 2026-11-02 Alice spent the afternoon sorting photos from the trip."


OPS = "delete 3\nstrike 5\nmove 8\n"


def _git_subjects(ws) -> list[str]:
    out = subprocess.run(
        ["git", f"--git-dir={ws / '.git'}", "log", "--format=%s"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.splitlines()


async def _setup(make_gateway, server, tmp_path, **settings):
    clock = FixedClock(datetime(2026, 11, 29, 3, 0, tzinfo=UTC))
    gateway, _ = await make_gateway(
        server,
        owner=OWNER,
        clock=clock,
        llm={"model": "main-model", "background_model": "cheap-model"},
        **settings,
    )
    ws = ensure_workspace(tmp_path / "workspaces", OWNER)
    await gateway.versioning.ensure_repo(ws)
    (ws / "MEMORY.md").write_text(MEMORY)
    return gateway, ws, clock


def test_the_cheap_checks() -> None:
    assert has_duplicates(MEMORY) and not has_duplicates(TIDIED)
    assert parse_answer("Here is a tidier file: ...", MEMORY) is None
    assert parse_answer("NONE", MEMORY) == {}
    ops = parse_answer(
        OPS + "delete 1\ndelete 99\nmove 3\nreplace 9: - Alice likes aisle seats now.", MEMORY
    )
    assert ops == {
        3: ("delete", ""),
        5: ("strike", ""),
        8: ("move", ""),
        9: ("replace", "- Alice likes aisle seats now."),
    }  # heading, range, twice
    assert lines_dropped(ops, MEMORY) == 1  # only the duplicate is deleted
    new, moved = apply_ops(MEMORY, parse_answer(OPS, MEMORY), "2026-11-29")
    assert (new, moved) == (TIDIED, [MOVED])


async def test_a_pass_tidies_commits_and_is_undone(openai_server, make_gateway, tmp_path):
    gateway, ws, clock = await _setup(make_gateway, openai_server, tmp_path)
    tidier = Tidier(gateway.parts)
    openai_server.reply_text(OPS)
    done = await tidier.run_due()
    assert done[OWNER].status == "tidied", done
    assert (ws / "MEMORY.md").read_text() == TIDIED
    assert MOVED in (ws / "memory" / "2026-11-29.md").read_text()
    request = openai_server.requests[0]
    assert request["model"] == "cheap-model"  # the background model
    assert "Memory tidying" in json.dumps(request["messages"]) and not request.get("tools")
    assert _git_subjects(ws)[0].startswith("tidy:")
    state = json.loads((ws / ".clawgate-tidy.json").read_text())
    assert state["day"] == "2026-11-29" and state["input_tokens"] > 0
    # Once a day at most, and not again while nothing changed.
    (ws / "MEMORY.md").write_text(MEMORY)
    assert await tidier.run_due() == {}
    clock.advance(timedelta(days=1))
    (ws / "MEMORY.md").write_text(TIDIED)
    await gateway.versioning.commit(ws, "hand edit")
    assert await tidier.run_due() == {}  # no duplicates, well within its budget
    assert len(openai_server.requests) == 1
    # `clawgate memory undo` takes the tidy commit back.
    (ws / "MEMORY.md").write_text(MEMORY)
    await gateway.versioning.commit(ws, "hand edit")
    openai_server.reply_text(OPS)
    clock.advance(timedelta(days=1))
    assert (await tidier.run_due())[OWNER].status == "tidied"
    await Versioning().undo(ws)
    assert (ws / "MEMORY.md").read_text() == MEMORY
    metric = gateway.metrics.registry.registry.get_sample_value(
        "clawgate_memory_tidy_total", {"outcome": "tidied"}
    )
    assert metric == 2.0


async def test_a_rewrite_dropping_too_much_is_refused(openai_server, make_gateway, tmp_path):
    gateway, ws, _ = await _setup(make_gateway, openai_server, tmp_path)
    openai_server.reply_text("delete 2\ndelete 4\ndelete 6\ndelete 7\n")
    outcome = (await Tidier(gateway.parts).run_due())[OWNER]
    assert outcome.status == "refused" and "nothing was written" in outcome.note
    assert (ws / "MEMORY.md").read_text() == MEMORY
    assert not any(s.startswith("tidy:") for s in _git_subjects(ws))
    assert json.loads((ws / ".clawgate-tidy.json").read_text())["status"] == "refused"


async def test_replacing_every_line_with_a_dot_is_a_pass_that_drops_them(
    openai_server, make_gateway, tmp_path
):
    """Red-team round 3: `replace N: .` for every line counted as keeping them all, and the
    pass was applied (MEMORY.md became dots). A line is kept only if its content is."""
    gateway, ws, _ = await _setup(make_gateway, openai_server, tmp_path)
    lines = MEMORY.split("\n")
    openai_server.reply_text("\n".join(f"replace {n}: ." for n in range(2, len(lines))))
    outcome = (await Tidier(gateway.parts).run_due())[OWNER]
    assert outcome.status == "refused" and outcome.dropped == 9, outcome
    assert (ws / "MEMORY.md").read_text() == MEMORY
    # A merge or a correction keeps the line's content: still counted as kept.
    ops = parse_answer(
        "replace 4: - Alice's sister is Jana, a nurse in Graz.\n"
        "replace 9: - Alice prefers aisle seats now.\nreplace 10: ?",
        MEMORY,
    )
    assert ops is not None and lines_dropped(ops, MEMORY) == 1  # only line 10


async def test_garbage_over_budget_and_a_race_write_nothing(openai_server, make_gateway, tmp_path):
    gateway, ws, clock = await _setup(make_gateway, openai_server, tmp_path)
    tidier = Tidier(gateway.parts)
    openai_server.reply_text("Sure! Here is a tidier version: ...")
    assert (await tidier.tidy(OWNER, ws)).status == "unparsed"
    assert json.loads((ws / ".clawgate-tidy.json").read_text())["status"] == "unparsed"
    assert (ws / "MEMORY.md").read_text() == MEMORY

    def edit_meanwhile(body):  # a DM turn writes MEMORY.md while the model works
        (ws / "MEMORY.md").write_text(MEMORY + "- Alice has a cat.\n")
        return openai_server.make_text(OPS)

    openai_server.responder = edit_meanwhile
    clock.advance(timedelta(days=1))
    outcome = await tidier.tidy(OWNER, ws)
    assert outcome.status == "raced"
    assert "Alice has a cat" in (ws / "MEMORY.md").read_text()
    openai_server.responder = None

    settings = gateway.settings.model_copy(
        update={"memory": gateway.settings.memory.model_copy(update={"tidy_max_tokens": 500})}
    )
    gateway.parts.settings = settings  # what the tidier reads
    clock.advance(timedelta(days=1))
    asked = len(openai_server.requests)
    outcome = await Tidier(gateway.parts).tidy(OWNER, ws, force=True)
    assert outcome.status == "over_budget" and len(openai_server.requests) == asked


async def test_a_failing_model_is_a_failed_pass_tried_again_another_day(
    openai_server, make_gateway, tmp_path
):
    gateway, ws, clock = await _setup(make_gateway, openai_server, tmp_path)
    openai_server.reply_error(500)  # the background model,
    openai_server.reply_error(500)  # then the main one it falls back to
    outcome = await Tidier(gateway.parts).tidy(OWNER, ws)
    assert outcome.status == "failed" and (ws / "MEMORY.md").read_text() == MEMORY
    clock.advance(timedelta(days=1))
    openai_server.reply_text(OPS)
    assert (await Tidier(gateway.parts).tidy(OWNER, ws)).status == "tidied"
