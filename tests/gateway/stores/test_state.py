"""The gateway state database (gateway/stores/state.py): inbox, retention, approvals, links,
offsets, routes, modes, and what a corrupt file does."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from channels.base import InboundMessage
from gateway.pipeline.access import AccessDecision
from gateway.stores.inbox import PRUNE_EVERY
from gateway.stores.state import StateDB, state_path
from tests.fakes.channel import RecordingChannel
from tests.state_rows import inbound_status

CANARY = "canary-body-7c1e"


def _msg(
    i: int,
    *,
    chat: str = "c1",
    text: str = "hello",
    chat_type: str = "direct",
    at: datetime | None = None,
) -> InboundMessage:
    return InboundMessage(
        "telegram",
        chat,
        f"u-{chat}",
        text,
        chat_type=chat_type,  # type: ignore[arg-type]
        message_id=str(i),
        sender_name="Ana",
        received_at=at or datetime.now(UTC),
    )


def _bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


async def test_inbox_records_once_and_resumes_pending_in_order(tmp_path):
    async with StateDB.for_root(tmp_path) as state:
        assert await state.inbox.record_inbound(_msg(1))
        assert await state.inbox.record_inbound(_msg(2))
        assert not await state.inbox.record_inbound(_msg(1))  # a redelivery
        assert [m.message_id for m in await state.inbox.pending_inbound()] == ["1", "2"]
        await state.inbox.mark_done(_msg(1))
        assert [m.message_id for m in await state.inbox.pending_inbound()] == ["2"]
        assert await inbound_status(state, "telegram", "c1", "1") == "done"
        assert (await state.inbox.pending_inbound())[0].text == "hello"  # pending keeps its body


async def test_done_drops_the_body_but_keeps_the_id_for_dedup(tmp_path):
    async with StateDB.for_root(tmp_path) as state:
        await state.inbox.record_inbound(_msg(1, text=CANARY))
        await state.inbox.record_inbound(_msg(2, text=CANARY, chat="stranger"))
        await state.inbox.mark_done(_msg(1))
        await state.inbox.mark_done(_msg(2, chat="stranger"), "denied")
        assert not await state.inbox.record_inbound(_msg(1, text=CANARY))  # still deduplicated
        assert not await state.inbox.record_inbound(_msg(2, chat="stranger"))
        assert await state.inbox.last_message_ids("telegram") == {"c1": "1", "stranger": "2"}
    assert CANARY.encode() not in _bytes(state_path(tmp_path))
    assert b"Ana" not in _bytes(state_path(tmp_path))


async def test_old_ids_are_pruned_except_each_chats_newest(tmp_path):
    old = datetime.now(UTC) - timedelta(days=3)
    async with StateDB.for_root(tmp_path, inbox_retention=timedelta(days=2)) as state:
        for i in range(1, 4):
            await state.inbox.record_inbound(_msg(i, at=old + timedelta(seconds=i)))
            await state.inbox.mark_done(_msg(i))
        await state.inbox.record_inbound(_msg(9, chat="stranger", at=old))
        await state.inbox.mark_done(_msg(9, chat="stranger"), "denied")
        await state.inbox.record_inbound(_msg(10, chat="c2", at=old))  # pending: never pruned
        assert await state.inbox.prune_inbox() == 3  # 1, 2 and the stranger's
        assert await inbound_status(state, "telegram", "c1", "3") == "done"
        assert await inbound_status(state, "telegram", "c1", "1") is None
        assert await inbound_status(state, "telegram", "stranger", "9") is None
        assert [m.message_id for m in await state.inbox.pending_inbound()] == ["10"]
        assert await state.inbox.last_message_ids("telegram") == {"c1": "3", "c2": "10"}


async def test_pruning_runs_by_itself_as_messages_are_answered(tmp_path):
    old = datetime.now(UTC) - timedelta(days=30)
    async with StateDB.for_root(tmp_path) as state:  # default retention: 7 days
        for i in range(PRUNE_EVERY):
            await state.inbox.record_inbound(_msg(i, chat=f"s{i}", at=old))
            await state.inbox.mark_done(_msg(i, chat=f"s{i}"), "denied")
        rows = await state.database.rows("SELECT COUNT(*) FROM inbox")
        assert rows[0][0] == 0


class _DenyAll:
    async def check(self, msg: InboundMessage) -> AccessDecision:
        return AccessDecision(False)


async def test_strangers_messages_are_not_kept(anthropic_server, make_settings, tmp_path):
    from gateway.agent.providers import build_provider
    from gateway.pipeline.gateway import Gateway
    from tests.conftest import llm_overrides

    settings = make_settings(**llm_overrides(anthropic_server))
    channel = RecordingChannel()
    gateway = Gateway.build(
        settings, build_provider(settings), channels=[channel], access=_DenyAll()
    )
    await gateway.start()
    try:
        for i in range(20):
            await channel.inject(f"stranger{i}", f"{CANARY} {i}")
    finally:
        await gateway.stop()
    assert not anthropic_server.requests
    db = state_path(settings.workspaces_dir)
    assert CANARY.encode() not in _bytes(db)


async def test_approvals_links_offsets_and_routes(tmp_path):
    async with StateDB.for_root(tmp_path) as state:
        await state.access.approve("telegram", "42", "code")
        assert await state.access.is_approved("telegram", "42")
        assert [a[:2] for a in await state.access.approved()] == [("telegram", "42")]
        assert await state.access.revoke("telegram", "42")
        assert not await state.access.is_approved("telegram", "42")
        assert not await state.access.revoke("telegram", "42")
        await state.links.link("telegram", "42", "ana")
        assert await state.links.person_for("telegram", "42") == "ana"
        assert await state.links.all() == [("ana", "telegram", "42")]
        assert await state.links.unlink("telegram", "42")
        assert await state.links.person_for("telegram", "42") is None
        assert await state.offsets.load_offset("telegram") is None
        await state.offsets.save_offset("telegram", 17)
        await state.offsets.save_offset("telegram", 18)
        assert await state.offsets.load_offset("telegram") == 18
        at = datetime(2026, 11, 30, tzinfo=UTC)
        await state.links.set_last_dm_route("ana", "telegram", "c1", "42", at)
        route = await state.links.last_dm_route("ana")
        assert route is not None and (route.chat_id, route.at) == ("c1", at)


async def test_the_database_is_private_whatever_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        async with StateDB.for_root(tmp_path) as state:
            await state.inbox.record_inbound(_msg(1))
            files = list(state.path.parent.iterdir())
    finally:
        os.umask(old)
    assert stat.S_IMODE(state.path.parent.stat().st_mode) == 0o700
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files if f.exists())


async def test_rows_written_before_the_body_table_still_resume_and_are_trimmed(tmp_path):
    from gateway.stores.inbox import _encode

    async with StateDB.for_root(tmp_path) as state:
        old = _msg(5, text=CANARY)
        await state.database.write(
            "INSERT INTO inbox (channel, chat_id, message_id, payload, received_at)"
            " VALUES (?, ?, ?, ?, ?)",
            ("telegram", "c1", "5", _encode(old), "2026-11-01T00:00:00"),
        )
        assert [m.text for m in await state.inbox.pending_inbound()] == [CANARY]
        await state.inbox.mark_done(old)
        assert await state.inbox.last_message_ids("telegram") == {"c1": "5"}
    assert CANARY.encode() not in _bytes(state_path(tmp_path))
