"""A link end to end in a real process: `clawgate run` against the fake Telegram server, a
scripted model and a loopback web page. The person sends a link; the model calls web_fetch on
it; its answer quotes the page, so the reply can only be right if the fetch worked. A second
message asks for a URL the person never sent, carrying a secret: it is refused and never
requested."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.llm_server import Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fakes.web_server import FakeWebServer
from tests.reliability.process import gateway_env, start_gateway

USER = 4242
SECRET = "zebracanary-door-code-5150"


def quote_the_page(server: Any):  # type: ignore[no-untyped-def]
    """The scripted model's second step: answer with the sentence about Friday from the
    web_fetch result (or say what went wrong)."""

    def respond(body: dict[str, Any]) -> Reply:
        results = [
            block
            for message in body["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]
        if not results:
            return server.make_text("no tool result")
        content = results[-1]["content"]
        text = content if isinstance(content, str) else json.dumps(content)
        if results[-1].get("is_error"):
            return server.make_text(f"refused: {text[:200]}")
        found = re.search(r"Friday in Lisbon will be [^.]+\.", " ".join(text.split()))
        return server.make_text(f"The page says: {found.group(0)}" if found else "not found")

    return respond


async def test_a_link_sent_on_telegram_is_fetched_and_used_in_the_answer(
    tmp_path, anthropic_server
) -> None:
    tg = FakeTelegramServer(max_poll=0.3)
    await tg.start()
    site = FakeWebServer()
    await site.start()
    env = gateway_env(
        tmp_path,
        tg,
        anthropic_server.base_url,
        [USER],
        CLAWGATE_WEB__ALLOW_NETWORKS="127.0.0.1/32",  # the page lives there
        CLAWGATE_WEB__BACKEND="none",
    )
    log = tmp_path / "gateway.log"
    process = await start_gateway(env, log)
    try:
        link = site.url("/article")
        anthropic_server.reply_tool_call("web_fetch", {"url": link})
        anthropic_server.responder = quote_the_page(anthropic_server)
        await tg.send_text(USER, f"What will the weather be on Friday? {link}")
        await tg.wait_sent(1, timeout=30)

        made_up = site.url(f"/collect?code={SECRET}")
        anthropic_server.reply_tool_call("web_fetch", {"url": made_up})
        await tg.send_text(USER, "thanks!")
        await tg.wait_sent(2, timeout=30)
    finally:
        process.terminate()
        await process.wait()
        await site.stop()
        await tg.stop()
    answer, refusal = tg.texts(USER)
    assert answer == (
        "The page says: Friday in Lisbon will be sunny with a high of 24 degrees "
        "and a light breeze from the Atlantic."
    ), log.read_text()[-3000:]
    assert refusal.startswith("refused: web_fetch:") and "not sent by the person" in refusal
    assert site.paths() == ["/article"]  # the made-up URL was never requested
    fetch_request = json.dumps(anthropic_server.requests[1])
    assert "<<<untrusted web content" in fetch_request
