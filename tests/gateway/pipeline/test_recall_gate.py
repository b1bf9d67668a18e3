"""The auto-recall gate (gateway/pipeline/recall_gate.py): small talk gets no block, whatever
the cosines say; a hit that shares no word or name with the message is left out; a real
question about a stored fact still gets its block. The small-talk set is
tests/fixtures/small_talk.txt (greetings, thanks, "still alive?", emoji, in several
languages)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from gateway.config.memory import MemorySettings, build_memory_service
from gateway.pipeline.auto_recall import HEADING, NO_BLOCK, AutoRecall, RecallOptions, render
from gateway.pipeline.recall_gate import Message
from gateway.pipeline.routing import Route
from gateway.workspace.seed import ensure_workspace
from memory.search import SearchResult
from memory.service import MemoryOptions, MemoryService
from tests.fakes.embedder import FakeEmbedder

OWNER = "fakechat-alice"
SMALL_TALK = [
    line
    for line in (Path(__file__).parents[2] / "fixtures" / "small_talk.txt")
    .read_text(encoding="utf-8")
    .splitlines()
    if line.strip() and not line.startswith("#")
]
NOTES = {
    # Lorem ipsum is what "still alive?" once recalled.
    "2026-02-11.md": "- Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n"
    "- Sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.\n",
    "2026-03-01.md": "- Went to the market, bought apples.\n"
    "- The wifi password at the cabin in Lofoten is fjord-otter-88.\n",
    "2026-03-04.md": "- Jana's birthday is on 14 May; she wants a book about birds.\n"
    "- Tomas's birthday is on 2 June.\n",
    "2026-03-09.md": "- Good morning! Thanks for the help yesterday, all good now.\n"
    "- Still alive and well, just busy. Good night!\n",
}


def _plant(ws: Path) -> None:
    for name, text in NOTES.items():
        (ws / "memory" / name).write_text(text, encoding="utf-8")


def _route(ws: Path) -> Route:
    return Route(
        person_id=OWNER,
        workspace=ws,
        session_key="dm",
        private=True,
        channel="fakechat",
        chat_id="alice",
    )


def test_the_small_talk_set_is_large_and_varied() -> None:
    assert len(SMALL_TALK) >= 50
    assert {"still alive?", "ok", "👍", "lol", "good night", "gute Nacht!", "merci", "谢谢"} <= set(
        SMALL_TALK
    )


def test_small_talk_has_nothing_to_look_up() -> None:
    searched = [text for text in SMALL_TALK if Message(text).worth_searching]
    assert searched == []


def test_arithmetic_is_not_looked_up() -> None:
    assert not Message("what's 15% of 80?").worth_searching
    assert Message("what was the 4471 code for?").worth_searching


def test_questions_have_something_to_look_up() -> None:
    for text in [
        "what's the wifi password at the cabin?",
        "when is Jana's birthday?",
        "Wann hat Jana Geburtstag?",
        "我的护照什么时候到期？",
        "locker code?",
        "how much does the tax adviser charge?",
    ]:
        assert Message(text).worth_searching, text


def test_names_are_capitalised_words_inside_a_sentence() -> None:
    message = Message("Thanks. When is Jana's birthday, and did Tomas call?")
    assert message.names == {"jana", "tomas"}  # "Thanks" and "When" start sentences
    assert Message("what did I buy?").names == frozenset()


def test_names_and_topic_words_agree_by_stem() -> None:
    message = Message("when is Jana's birthday?")
    assert message.names_agree("- Jana's birthday is on 14 May")
    assert not message.names_agree("- Tomas's birthday is on 2 June")  # another person
    assert message.topic_agrees("- Tomas's birthday is on 2 June")
    assert not message.topic_agrees("- Jana went climbing")  # the name is not a topic word
    assert Message("Was it in March?").names == frozenset()  # months name no one
    assert Message("what's the cabin wifi password?").topic_agrees("The wifi passwords: x")
    assert not Message("what's the cabin wifi password?").topic_agrees("Lorem ipsum dolor")
    assert Message("西湖怎么样？").topic_agrees("周末去了杭州的西湖，天气很好")  # by pairs
    assert not Message("上周末去哪里玩了").topic_agrees("- Went to the market")
    assert not Message("我的护照什么时候到期？").topic_agrees("我的猫什么时候吃饭")  # common pairs


def _result(text: str, cosine: float = 0.95) -> SearchResult:
    return SearchResult(
        path="memory/a.md",
        start_line=1,
        end_line=2,
        score=1.0,
        snippet=text,
        source="memory",
        line=1,
        cosine=cosine,
    )


def test_render_leaves_out_hits_about_something_else() -> None:
    opts = RecallOptions(min_similarity=0.5, max_hits=3, max_tokens=400)
    block = render(
        [_result("- Tomas's birthday is on 2 June."), _result("- Jana's birthday is on 14 May.")],
        opts,
        {},
        Message("when is Jana's birthday?"),
    )
    assert block.hits == 1 and "14 May" in block.text and "Tomas" not in block.text
    # Just under the threshold (within AGREEMENT_MARGIN): only with a shared topic word.
    wifi = Message("anything about the cabin wifi?")
    assert render([_result("- Lorem ipsum dolor sit amet.", 0.49)], opts, {}, wifi) == NO_BLOCK
    assert render([_result("- The cabin wifi is fjord-otter-88.", 0.49)], opts, {}, wifi).hits == 1
    assert (
        render([_result("- The cabin wifi is fjord-otter-88.", 0.46)], opts, {}, wifi) == NO_BLOCK
    )  # below the margin


async def test_small_talk_gets_no_block_through_the_gateway(openai_server, make_gateway, tmp_path):
    """Every hit confident by cosine (threshold -1, the test embedder), yet no small-talk
    message gets a block: the gate, not the threshold, keeps them out."""
    service = MemoryService(
        lambda: FakeEmbedder(), MemoryOptions(watch=False), today=lambda: date(2026, 11, 29)
    )
    gateway, channel = await make_gateway(
        openai_server,
        owner=OWNER,
        memory={"auto_recall_min_similarity": -1.0},
        limits={"messages_per_minute": 0},
        memory_service=service,
    )
    ws = ensure_workspace(tmp_path / "workspaces", OWNER)
    _plant(ws)
    await service.sync(ws)
    for number, text in enumerate(SMALL_TALK, start=1):
        openai_server.reply_text("🙂")
        await channel.inject("alice", text)
        await channel.wait_for(number)
    assert len(openai_server.requests) == len(SMALL_TALK)
    blocked = [
        text
        for text, request in zip(SMALL_TALK, openai_server.requests, strict=True)
        if HEADING in json.dumps(request["messages"][-1], ensure_ascii=False)
    ]
    assert blocked == []
    # The same workspace still answers a real question with its block.
    openai_server.reply_text("fjord-otter-88")
    await channel.inject("alice", "what is the wifi password at the cabin?")
    await channel.wait_for(len(SMALL_TALK) + 1)
    sent = json.dumps(openai_server.requests[-1]["messages"][-1], ensure_ascii=False)
    assert HEADING in sent and "fjord-otter-88" in sent
    metric = gateway.metrics.registry.render()
    assert f'clawgate_auto_recall_turns_total{{outcome="none"}} {len(SMALL_TALK)}.0' in metric
    await service.close()


async def test_the_bundled_embedder_at_the_default_settings(tmp_path):
    """The real index, the bundled local embedder (multilingual e5) and the default
    `[memory]` settings: no small-talk message gets a block; questions about stored facts
    get theirs; a question about someone memory does not know gets none."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    _plant(ws)
    settings = MemorySettings(watch=False, line_model="none")
    service = build_memory_service(settings, today=lambda: date(2026, 11, 29))
    assert service is not None
    recall = AutoRecall(service, RecallOptions.from_settings(settings))
    try:
        await service.sync(ws)  # every vector computed before it returns
        route = _route(ws)
        for text in SMALL_TALK:
            assert await recall.block(route, text) == NO_BLOCK, text
        wifi = await recall.block(route, "what's the wifi password at the cabin?")
        assert "fjord-otter-88" in wifi.text
        birthday = await recall.block(route, "when is Jana's birthday?")
        assert "14 May" in birthday.text
        assert await recall.block(route, "when is Piotr's birthday?") == NO_BLOCK
    finally:
        await service.close()


def test_a_message_of_names_only_agrees_through_them() -> None:
    message = Message("When was Jon in Paris?")
    assert message.names == {"jon", "paris"}
    assert message.topic_agrees("- Jon: I loved Paris in spring.")
    assert not message.topic_agrees("- Gina: I loved Rome in spring.")
