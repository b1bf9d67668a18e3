"""Hostile files at start, through the real process: one person's broken schedule (a hand edit,
a restored backup) or a broken config never turns into a gateway that is down for everyone.

On main `clawgate run` exited with "unexpected error: OverflowError" (RecursionError for the
deep file) as soon as the scheduler read the schedule of one workspace; a config nested
30,000 deep gave "unexpected error: RecursionError" instead of the one-line config error."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta

from gateway.workspace.seed import ensure_workspace
from memory.layout import SCHEDULE_FILE
from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway

ANA, BEN = 5150, 5151


async def test_run_starts_and_serves_everyone_with_broken_schedule_files(
    tmp_path, anthropic_server
) -> None:
    root = tmp_path / "workspaces"
    due = (datetime.now(UTC) + timedelta(seconds=14)).replace(microsecond=0)
    ana = ensure_workspace(root, f"telegram-{ANA}")
    (ana / SCHEDULE_FILE).write_text(
        json.dumps(
            {
                "version": 1,
                "next_id": 3,
                "jobs": [
                    {"id": 1, "kind": "message", "text": "boom", "when": "in 99999999999999 days"},
                    {
                        "id": 2,
                        "kind": "message",
                        "text": "Send the invoice",
                        "when": due.isoformat(),
                        "created": datetime.now(UTC).isoformat(timespec="seconds"),
                    },
                ],
            }
        )
    )
    ben = ensure_workspace(root, f"telegram-{BEN}")
    (ben / SCHEDULE_FILE).write_text('{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}")

    tg = FakeTelegramServer(max_poll=0.3)
    await tg.start()
    env = gateway_env(
        tmp_path,
        tg,
        anthropic_server.base_url,
        [ANA, BEN],
        CLAWGATE_SCHEDULER__RESCAN_SECONDS="0.5",
    )
    log = tmp_path / "gateway.log"
    process = await start_gateway(env, log)
    try:
        await tg.send_text(ANA, "/reminders")
        await _answered(tg, ANA, 1)
        anthropic_server.reply_text("Hello Ben.")
        await tg.send_text(BEN, "hello")
        await _answered(tg, BEN, 1)
        await tg.send_text(BEN, "/reminders")
        await _answered(tg, BEN, 2)
        remaining = (due - datetime.now(UTC)).total_seconds()
        await _answered(tg, ANA, 2, timeout=max(remaining, 0) + 8)
        assert process.returncode is None, log.read_text()[-3000:]
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 40)
        await tg.stop()
    output = log.read_text()
    listing = tg.texts(ANA)[0]
    assert "Send the invoice" in listing and "not running: job 1" in listing, listing
    assert "out of range" in listing
    assert tg.texts(BEN)[0] == "Hello Ben.", (tg.texts(BEN), tg.texts(ANA))
    assert "cannot be read" in tg.texts(BEN)[1] and "nested" in tg.texts(BEN)[1]
    assert tg.texts(ANA)[-1] == "Send the invoice"
    # About 30 rescans passed; each broken file was logged once (per version), no tracebacks.
    assert output.count("out of range") == 1, output[-3000:]
    assert output.count("nested more than") == 1, output[-3000:]
    assert "Traceback" not in output


async def _answered(tg: FakeTelegramServer, user: int, count: int, timeout: float = 20.0) -> None:
    """Until `user` has `count` messages from the gateway (others' messages do not count)."""
    async with asyncio.timeout(timeout):
        while len(tg.texts(user)) < count:
            await asyncio.sleep(0.05)


async def _run(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        *args,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, (out + err).decode()


async def test_a_config_nested_thousands_deep_is_one_line_and_exit_2(
    tmp_path, anthropic_server
) -> None:
    async with FakeTelegramServer() as tg:
        env = gateway_env(tmp_path, tg, anthropic_server.base_url, allow=[1])
    for body in ("[llm]\nmodel = " + "[" * 30_000, "[health]\nport = " + "9" * 5_000):
        (tmp_path / "none.toml").write_text(body)
        code, output = await _run(env, "run")
        assert code == 2, output
        lines = [line for line in output.splitlines() if line.startswith("clawgate:")]
        assert len(lines) == 1 and "none.toml" in lines[0], output
        assert "unexpected" not in output and "Traceback" not in output
