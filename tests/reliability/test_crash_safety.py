"""Crash safety: `clawgate run` as a real process, killed with SIGKILL at random points.

Several people keep writing through the fake Telegram server while the gateway is killed and
restarted 30 times (seeded, so a failure can be replayed; CRASH_SEED=N runs another seed).
Afterwards every message must have been answered, duplicates are counted, every file must be
intact, and every transcript line that existed at a kill must still be there.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from memory.sqlite import sqlite_module
from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway

SEED = int(os.environ.get("CRASH_SEED", "20261129"))  # another seed: measure more kills
KILLS = 30
PEOPLE = (4101, 4102, 4103, 4104, 4105)
MESSAGES = 120
TOKEN = re.compile(r"M-(\d{3})-X")


def _transcripts(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in root.rglob("sessions/*.jsonl")}


def _answered(tg: FakeTelegramServer) -> dict[str, list[int]]:
    """For each person, the message numbers each reply covers, one list entry per reply."""
    seen: dict[str, list[int]] = {}
    for sent in tg.sent:
        for number in TOKEN.findall(sent.text):
            seen.setdefault(sent.chat_id, []).append(int(number))
    return seen


async def test_kill_nine_at_random_points_loses_nothing(tmp_path, anthropic_server):
    rng = random.Random(SEED)

    def slow_echo(body: dict[str, Any]) -> Any:
        reply = anthropic_server.default_reply(body)
        return replace(reply, delay=rng.uniform(0.01, 0.15))

    anthropic_server.responder = slow_echo
    tg = FakeTelegramServer(max_poll=0.3)
    await tg.start()
    env = gateway_env(tmp_path, tg, anthropic_server.base_url, PEOPLE)
    log = tmp_path / "gateway.log"
    expected: dict[str, set[int]] = {}

    async def feed() -> None:
        for number in range(MESSAGES):
            person = rng.choice(PEOPLE)
            expected.setdefault(str(person), set()).add(number)
            await tg.send_text(person, f"note M-{number:03d}-X for later")
            await asyncio.sleep(rng.uniform(0.05, 0.35))

    feeder = asyncio.create_task(feed())
    snapshots: list[dict[Path, bytes]] = []
    try:
        for _ in range(KILLS):
            process = await start_gateway(env, log)
            await asyncio.sleep(rng.uniform(0.4, 2.5))
            process.kill()
            await process.wait()
            snapshots.append(_transcripts(tmp_path / "workspaces"))
        await feeder

        process = await start_gateway(env, log)
        try:
            for _ in range(450):  # 90 s at most; the assertions below say what is missing
                answered = _answered(tg)
                if all(numbers <= set(answered.get(chat, ())) for chat, numbers
                       in expected.items()):
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # let the last deliveries be recorded
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), 40)
    finally:
        feeder.cancel()
        await tg.stop()

    answered = _answered(tg)
    missing = {chat: sorted(numbers - set(answered.get(chat, ())))
               for chat, numbers in expected.items()}
    assert not any(missing.values()), f"unanswered: {missing}\n{log.read_text()[-3000:]}"
    duplicates = sum(count - 1 for numbers in answered.values()
                     for count in _counts(numbers).values() if count > 1)
    print(f"\ncrash safety: {KILLS} kills, {MESSAGES} messages from {len(PEOPLE)} people, "
          f"{len(tg.sent)} replies, {duplicates} duplicate answers")
    assert duplicates <= KILLS  # a kill between delivery and its record can repeat one

    root = tmp_path / "workspaces"
    final = _transcripts(root)
    for snapshot in snapshots:
        for path, content in snapshot.items():
            assert final[path].startswith(content), f"{path} lost lines after a kill"
    for content in final.values():
        for line in content.decode("utf-8").splitlines():
            json.loads(line)  # no torn or corrupt line
    for path in root.rglob("*.md"):
        path.read_text(encoding="utf-8")
    sqlite = sqlite_module()
    for path in [*root.rglob("*.sqlite"), *root.rglob("*.db")]:
        connection = sqlite.connect(path)
        try:
            assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok", path
        finally:
            connection.close()


def _counts(numbers: list[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for number in numbers:
        counts[number] = counts.get(number, 0) + 1
    return counts
