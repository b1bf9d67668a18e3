"""Auto-recall through the real gateway path: the owner's DM gets the confident hits for the
message in its request (never in the transcript); a group, another person and a disabled
setting get none; weak hits add nothing; the budget holds; what is in view is left out."""

from __future__ import annotations

import json
from datetime import date

from gateway.pipeline.auto_recall import HEADING, NO_BLOCK, RecallOptions, render
from gateway.pipeline.recall_gate import Message
from gateway.workspace.seed import ensure_workspace
from memory.search import SearchResult
from memory.service import MemoryOptions, MemoryService
from tests.fakes.embedder import FakeEmbedder

OWNER = "fakechat-alice"


def _service() -> MemoryService:
    return MemoryService(
        lambda: FakeEmbedder(), MemoryOptions(watch=False), today=lambda: date(2026, 11, 29)
    )


def _plant(ws) -> None:
    (ws / "memory" / "2026-03-01.md").write_text(
        "- Went to the market.\n- The climbing gym locker code is 4471.\n- Rain all day.\n"
    )
    (ws / "memory" / "2026-03-04.md").write_text("- Paid the electricity bill.\n")


def _last_user_text(request: dict) -> str:
    return json.dumps(request["messages"][-1], ensure_ascii=False)


async def _gateway(make_gateway, server, tmp_path, **settings):
    # The fake embedder's cosines (hashed bags of words) are not the local model's.
    settings.setdefault("memory", {"auto_recall_min_similarity": 0.3})
    service = _service()
    gateway, channel = await make_gateway(server, owner=OWNER, memory_service=service, **settings)
    ws = ensure_workspace(tmp_path / "workspaces", OWNER)
    _plant(ws)
    await service.sync(ws)
    return gateway, channel, ws


async def test_owner_dm_gets_the_block_in_the_request_only(openai_server, make_gateway, tmp_path):
    gateway, channel, ws = await _gateway(make_gateway, openai_server, tmp_path)
    openai_server.reply_text("It is 4471.")
    await channel.inject("alice", "what is my climbing gym locker code?")
    await channel.wait_for(1)
    sent = _last_user_text(openai_server.requests[0])
    assert HEADING in sent and "4471" in sent
    assert "memory/2026-03-01.md" in sent
    transcripts = "".join(p.read_text() for p in (ws / "sessions").glob("*.jsonl"))
    assert "what is my climbing gym locker code?" in transcripts
    assert HEADING not in transcripts  # request-only: the history stays as it was said
    metric = gateway.metrics.registry.render()
    assert 'clawgate_auto_recall_turns_total{outcome="added"} 1.0' in metric


async def test_group_and_other_person_get_no_owner_memory(openai_server, make_gateway, tmp_path):
    _, channel, _ = await _gateway(make_gateway, openai_server, tmp_path)
    openai_server.reply_text("no idea")
    await channel.inject(
        "alice", "what is my climbing gym locker code?", chat_type="group", chat_id="g1"
    )
    await channel.wait_for(1)
    assert HEADING not in _last_user_text(openai_server.requests[-1])
    assert "4471" not in json.dumps(openai_server.requests[-1])
    # Bob's DM is private to Bob: his own (empty) memory, never Alice's.
    openai_server.reply_text("no idea")
    await channel.inject("bob", "what is my climbing gym locker code?")
    await channel.wait_for(2)
    assert "4471" not in json.dumps(openai_server.requests[-1])


async def test_setting_off_means_no_block(openai_server, make_gateway, tmp_path):
    _, channel, _ = await _gateway(
        make_gateway, openai_server, tmp_path, memory={"auto_recall": False}
    )
    openai_server.reply_text("ok")
    await channel.inject("alice", "what is my climbing gym locker code?")
    await channel.wait_for(1)
    assert HEADING not in _last_user_text(openai_server.requests[0])


async def test_unrelated_message_gets_no_block(openai_server, make_gateway, tmp_path):
    gateway, channel, _ = await _gateway(make_gateway, openai_server, tmp_path)
    openai_server.reply_text("you're welcome")
    await channel.inject("alice", "thanks so much, bye")
    await channel.wait_for(1)
    assert HEADING not in _last_user_text(openai_server.requests[0])
    metric = gateway.metrics.registry.render()
    assert 'clawgate_auto_recall_turns_total{outcome="none"} 1.0' in metric


async def test_a_new_person_opens_no_index(openai_server, make_gateway, tmp_path):
    """Nothing outside the prompt to recall: no search, so no index and no model to load."""
    service = _service()
    gateway, channel = await make_gateway(
        openai_server,
        owner=OWNER,
        memory_service=service,
        memory={"auto_recall_min_similarity": 0.3},
    )
    openai_server.reply_text("hello!")
    await channel.inject("carol", "hi, what can you do?")
    await channel.wait_for(1)
    assert service._indexes == {}
    metric = gateway.metrics.registry.render()
    assert 'clawgate_auto_recall_turns_total{outcome="none"} 1.0' in metric
    # An earlier conversation (archived by /new) makes the next turn search.
    await channel.inject("carol", "/new")
    await channel.wait_for(2)
    openai_server.reply_text("we talked about bikes")
    await channel.inject("carol", "what did we talk about last time?")
    await channel.wait_for(3)
    assert service._indexes != {}
    await service.close()


async def test_an_old_note_makes_a_new_person_search(openai_server, make_gateway, tmp_path):
    service = _service()
    _, channel = await make_gateway(
        openai_server,
        owner=OWNER,
        memory_service=service,
        memory={"auto_recall_min_similarity": 0.3},
    )
    openai_server.reply_text("hello!")
    await channel.inject("carol", "hi, what can you do?")
    await channel.wait_for(1)
    assert service._indexes == {}
    ws = ensure_workspace(tmp_path / "workspaces", "fakechat-carol")
    (ws / "memory" / "2026-01-05.md").write_text("- Carol's bike lock code is 9120.\n")
    openai_server.reply_text("9120")
    await channel.inject("carol", "what is my bike lock code?")
    await channel.wait_for(2)
    assert service._indexes != {}  # searched (its vector comes in the background)
    await service.close()


def _result(path: str, score: float, text: str, start: int = 1) -> SearchResult:
    return SearchResult(
        path=path,
        start_line=start,
        end_line=start + 2,
        score=1.0,
        snippet=text,
        source="memory",
        line=start,
        cosine=score,
    )


def test_render_keeps_confident_hits_within_the_budget() -> None:
    opts = RecallOptions(min_similarity=0.5, max_hits=3, max_tokens=120)
    results = [
        _result("memory/a.md", 0.9, "alpha " * 200),
        _result("memory/b.md", 0.8, "beta"),
        _result("memory/c.md", 0.3, "gamma"),
        _result("memory/d.md", 0.7, "delta"),
    ]
    about = Message("alpha beta gamma delta")  # a word of each hit: the cosine decides
    block = render(results, opts, {}, about)
    assert block.tokens <= 120
    assert "gamma" not in block.text  # below the threshold
    assert block.text.startswith(HEADING) and "alpha" in block.text
    assert render([_result("memory/c.md", 0.3, "gamma")], opts, {}, about) == NO_BLOCK
    keyword_only = SearchResult(
        path="memory/e.md", start_line=1, end_line=1, score=1.0, snippet="epsilon", source="memory"
    )
    # No cosine: no evidence.
    assert render([keyword_only], opts, {}, Message("epsilon again")) == NO_BLOCK


def test_render_leaves_out_what_is_in_view() -> None:
    opts = RecallOptions(min_similarity=0.0, max_hits=3, max_tokens=400)
    results = [
        _result("MEMORY.md", 0.9, "in the prompt already"),
        _result("sessions/dm.jsonl", 0.9, "still in the history", start=40),
        _result("sessions/dm.jsonl", 0.8, "compacted away long ago", start=3),
    ]
    block = render(
        results,
        opts,
        {"MEMORY.md": 0, "sessions/dm.jsonl": 20},
        Message("prompt history compacted"),
    )
    assert "in the prompt already" not in block.text
    assert "still in the history" not in block.text
    assert "compacted away long ago" in block.text and block.hits == 1
