"""A kill -9 while an approval is pending: `clawgate run` as a real process (the fake Bot API
and the fake model on loopback), killed with SIGKILL while the question waits for the owner,
started again; the button pressed afterwards still answers, and what was approved runs once.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

from tests.fakes.telegram_server import FakeTelegramServer
from tests.gateway.features.exec.conftest import wait_until
from tests.reliability.process import gateway_env, start_gateway

OWNER = 42


def offers(log: Path) -> int:
    """How many starts have logged that the exec tool is offered (its probe passed)."""
    try:
        return log.read_text(encoding="utf-8").count("the exec tool is offered")
    except OSError:
        return 0


def question_recorded(state_db: Path) -> bool:
    """The approval row knows its question's platform message: the question is both sent and
    recorded (a kill between the two shows it again after the restart, the documented window
    of docs/exec.md)."""
    if not state_db.exists():
        return False
    try:
        with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True) as db:
            rows = db.execute(
                "SELECT count(*) FROM exec_approvals WHERE request_message != ''"
            ).fetchone()
    except sqlite3.OperationalError:  # not migrated yet, or busy
        return False
    return bool(rows and rows[0])


async def test_the_button_still_answers_after_a_kill_9(tmp_path, anthropic_server, sandbox_works):
    command = "echo survived-$((40+2)) >> notes/ran.txt; cat notes/ran.txt"
    anthropic_server.reply_tool_call("exec", {"command": command})
    async with FakeTelegramServer(max_poll=0.3) as tg:
        env = gateway_env(
            tmp_path, tg, anthropic_server.base_url, [OWNER], CLAWGATE_OWNER=f"telegram-{OWNER}"
        )
        log = tmp_path / "gateway.log"
        (tmp_path / "workspaces" / f"telegram-{OWNER}" / "notes").mkdir(parents=True)
        process = await start_gateway(env, log)
        try:
            # The sandbox is probed beside the first poll; the tool is offered once it passed.
            await wait_until(lambda: offers(log) == 1, timeout=60, what="the sandbox's probe")
            await tg.send_text(OWNER, "note it")
            await wait_until(lambda: bool(tg.with_buttons(OWNER)), timeout=60, what="the question")
            asked = tg.with_buttons(OWNER)[0]
            await wait_until(
                lambda: question_recorded(tmp_path / "workspaces" / ".gateway" / "state.db"),
                timeout=30,
                what="the question's record",
            )
            process.send_signal(signal.SIGKILL)
            await process.wait()
            # The turn that asked died with the process; after the restart it runs again
            # and asks the same question (the same pending row: no second question), or
            # the press alone decides it. Either way the command runs exactly once.
            anthropic_server.reply_tool_call("exec", {"command": command})
            anthropic_server.reply_text("noted after the restart")
            polls = len(tg.offsets_seen)
            process = await start_gateway(env, log)
            await wait_until(
                lambda: len(tg.offsets_seen) > polls + 1, timeout=60, what="polling again"
            )
            query = await tg.press(OWNER, asked, asked.button_data()[0])
            assert "Approved" in await tg.wait_answered(query, timeout=30)
            ran = tmp_path / "workspaces" / f"telegram-{OWNER}" / "notes" / "ran.txt"
            await wait_until(lambda: ran.exists(), timeout=30, what="the command's run")
            await wait_until(
                lambda: any("survived-42" in t or "noted after" in t for t in tg.texts(OWNER)),
                timeout=30,
                what="the result in the chat",
            )
            # The turn that died is run again and answers: it neither asks again nor runs
            # the command a second time, whichever came first, its model call or the press.
            await wait_until(
                lambda: "noted after the restart" in tg.texts(OWNER),
                timeout=60,
                what="the resumed turn's reply",
            )
            seen = json.dumps(anthropic_server.requests[-1]) + "\n".join(tg.texts(OWNER))
            assert "survived-42" in seen
            assert ran.read_text() == "survived-42\n"  # once
            assert len(tg.with_buttons(OWNER)) == 1  # asked once
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                await process.wait()
        assert "Traceback" not in log.read_text()
