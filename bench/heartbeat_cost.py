"""Tokens per heartbeat: the light heartbeat context against a full DM context.

A workspace is seeded from the default templates, with a typical checklist (a few lines and a
tasks block), today's and yesterday's notes, some MEMORY.md and a DM history of 40 exchanges.
The real provider SDKs send their requests to the loopback fake servers; the exact request
bodies are captured and measured.

No tokenizer is installed, so tokens are ESTIMATED as characters / 4 of the exact JSON request
body (which also counts JSON punctuation and tool schemas, so it errs high). Output tokens
are estimated the same way from the reply text.

    python bench/heartbeat_cost.py [--history 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from channels.base import InboundMessage
from gateway.agent.providers import build_provider
from gateway.clock import FixedClock
from gateway.config.settings import load_settings
from gateway.features.heartbeat_host import GatewayHeartbeatHost, policy_for
from gateway.pipeline.access import AccessDecision
from gateway.pipeline.gateway import Gateway
from gateway.workspace.seed import ensure_workspace
from heartbeat import STANDING_PROMPT, Heartbeat
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import FakeAnthropicServer, FakeLLMServer, FakeOpenAIServer

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
PERSON = "bench-ana"
CHECKLIST = """\
# HEARTBEAT.md

- If today's note lists something due today that is not marked done, remind me once.
- If a bill in MEMORY.md is due within two days, tell me the amount and the date.
- Anything marked URGENT in today's note: tell me right away.

tasks:
- name: inbox
  interval: 2h
  prompt: Look at memory/inbox.md; mention anything older than a day that is still open.
- name: weekly-review
  interval: 7d
  prompt: On Friday afternoon, remind me to do the weekly review.
"""
TODAY = """\
# 2026-03-02
- 09:10 Ana moved the dentist appointment to 15:00 today.
- Pay the electricity bill (EUR 84.20) by Wednesday.
- Call the landlord about the broken heater. Not done yet.
- Lunch with Ben at 12:30, Rue Oberkampf.
"""
YESTERDAY = "# 2026-03-01\n- Bought train tickets to Lyon for March 14.\n- Finished the book.\n"
MEMORY = "\n".join(
    f"- Fact {n}: Ana prefers tea to coffee, works 9-17, runs on Tuesdays and Thursdays."
    for n in range(20)
)
ACK = "HEARTBEAT_OK"
ALERT = "Reminder: the dentist is at 15:00 today, and the landlord call about the heater is open."


class AllowAll:
    async def check(self, msg: InboundMessage) -> AccessDecision:
        return AccessDecision(True)


def tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def body_chars(body: dict[str, Any]) -> int:
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")))


async def measure(server: FakeLLMServer, history: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspaces"
        provider_name = "anthropic" if isinstance(server, FakeAnthropicServer) else "openai"
        settings = load_settings(
            Path(tmp) / "none.toml",
            workspaces_dir=root,
            timezone="UTC",
            llm={
                "provider": provider_name,
                "base_url": server.base_url,
                "api_key": "k",
                "max_attempts": 1,
            },
            heartbeat={"active_start": "00:00", "active_end": "00:00"},
        )
        workspace = ensure_workspace(root, PERSON)
        (workspace / "HEARTBEAT.md").write_text(CHECKLIST)
        (workspace / "memory" / "2026-03-02.md").write_text(TODAY)
        (workspace / "memory" / "2026-03-01.md").write_text(YESTERDAY)
        with (workspace / "MEMORY.md").open("a") as handle:
            handle.write("\n" + MEMORY + "\n")
        clock = FixedClock(NOW)
        channel = RecordingChannel("bench")
        gateway = Gateway.build(
            settings, build_provider(settings), channels=[channel], clock=clock, access=AllowAll()
        )
        await gateway.start()
        try:
            # A DM history of `history` exchanges in the person's DM session.
            server.responder = lambda body: server.make_text(
                "Sure, I noted that in today's file and will keep an eye on it for you."
            )
            for n in range(history):
                await gateway.handle(
                    InboundMessage(
                        "bench",
                        "ana",
                        "ana",
                        f"Message {n}: can you remember that the plumber might come on Thursday "
                        f"between 9 and 11, and remind me to buy milk?",
                        message_id=str(n),
                    )
                )
            await gateway.lanes.drain()
            # map the bench sender to the workspace: its person id is bench-ana
            beat = Heartbeat(
                workspace,
                PERSON,
                GatewayHeartbeatHost(gateway.parts),
                policy_for(settings, PERSON),
                clock,
            )
            results: dict[str, int] = {}
            for label, reply in (("ack", ACK), ("alert", ALERT)):
                server.responder = lambda body, reply=reply: server.make_text(reply)
                before = len(server.requests)
                outcome = await beat.beat()
                assert outcome.status in ("ok", "alert"), outcome
                request = server.requests[before]
                results[f"light_{label}_in"] = tokens(body_chars(request))
                results[f"light_{label}_out"] = tokens(len(reply))
                clock._now = clock.now().replace(hour=clock.now().hour + 1)
            # The same check as an ordinary DM turn: every file and the whole DM history.
            server.responder = lambda body: server.make_text(ACK)
            before = len(server.requests)
            await gateway.handle(
                InboundMessage("bench", "ana", "ana", STANDING_PROMPT, message_id="full")
            )
            await gateway.lanes.drain()
            results["full_in"] = tokens(body_chars(server.requests[before]))
            results["full_out"] = tokens(len(ACK))
            results["tool_schema_chars"] = len(json.dumps(server.requests[before].get("tools")))
            return results
        finally:
            await gateway.stop()


async def main(history: int) -> None:
    print(
        f"Tokens per beat, estimated as characters/4 of the exact request body (no tokenizer "
        f"installed); default templates, typical checklist, {history} DM exchanges."
    )
    print(f"{'provider':<10} {'context':<26} {'input':>7} {'output':>7}")
    for server_class in (FakeAnthropicServer, FakeOpenAIServer):
        async with server_class() as server:
            figures = await measure(server, history)
        name = "anthropic" if server_class is FakeAnthropicServer else "openai"
        rows = [
            ("light, HEARTBEAT_OK", figures["light_ack_in"], figures["light_ack_out"]),
            ("light, with an alert", figures["light_alert_in"], figures["light_alert_out"]),
            ("full DM context", figures["full_in"], figures["full_out"]),
        ]
        for label, inp, out in rows:
            print(f"{name:<10} {label:<26} {inp:>7,} {out:>7,}")
        per_day = 28 * (figures["light_ack_in"] + figures["light_ack_out"])
        full_day = 28 * (figures["full_in"] + figures["full_out"])
        print(
            f"{name:<10} per day (28 beats, 08:00-22:00 every 30m): light {per_day:,}, "
            f"full {full_day:,}; tool schemas {figures['tool_schema_chars']:,} chars"
        )
    print("Target: at most 3,000 input tokens per beat with the default templates.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=40, help="DM exchanges before the beat")
    args = parser.parse_args()
    asyncio.run(main(args.history))
