"""What the state database keeps for media: a message's attachments survive a restart (so a
voice note recorded but not answered is fetched again), and the outbox carries files, also in
a database made before it had a column for them."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from channels.base import Attachment, InboundMessage
from gateway.stores.state import StateDB, state_path


async def test_attachments_are_kept_until_the_message_is_answered(tmp_path):
    voice = Attachment(
        "audio", "file-id-1", "voice.ogg", "audio/ogg", 9701, 4.0, label="voice message"
    )
    photo = Attachment(
        "image", "file-id-2", "photo.jpg", "image/jpeg", 1000, width=40, height=30, label="photo"
    )
    msg = InboundMessage(
        "telegram",
        "42",
        "42",
        "",
        message_id="7",
        received_at=datetime.now(UTC),
        attachment="voice message",
        attachments=(voice, photo),
    )
    async with StateDB.for_root(tmp_path) as state:
        assert await state.inbox.record_inbound(msg)
    async with StateDB.for_root(tmp_path) as state:  # a restart
        [pending] = await state.inbox.pending_inbound()
        assert pending.attachments == (voice, photo)


async def test_hostile_attachment_payloads_are_read_safely(tmp_path):
    from gateway.stores.inbox import _decode

    payload = (
        '{"channel": "telegram", "chat_id": "1", "sender_id": "1", "text": "x",'
        ' "chat_type": "direct", "message_id": "1", "sender_name": "",'
        ' "received_at": "2026-01-01T00:00:00+00:00", "addressed": false,'
        ' "attachment": "", "attachments": [{"kind": "audio", "ref": "r",'
        ' "evil": 1}, "not a dict"]}'
    )
    msg = _decode(payload)
    assert msg.attachments == (Attachment("audio", "r"),)


async def test_files_in_the_outbox_also_in_an_older_database(tmp_path):
    path = state_path(tmp_path)
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as db:  # the outbox as it was before files
        db.execute(
            "CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT UNIQUE,"
            " channel TEXT NOT NULL, chat_id TEXT NOT NULL, text TEXT NOT NULL,"
            " status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,"
            " error TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL, finished_at TEXT,"
            " done_channel TEXT, done_chat TEXT, done_message TEXT, done_status TEXT)"
        )
        db.execute(
            "INSERT INTO outbox (channel, chat_id, text, created_at)"
            " VALUES ('telegram', '42', 'an old reply', '2026-01-01')"
        )
    async with StateDB.for_root(tmp_path) as state:
        row = await state.outbox.enqueue_outbound(
            "telegram", "42", "the plan", key="file:1", file="/ws/plan.md"
        )
        assert row is not None
        assert (
            await state.outbox.enqueue_outbound(
                "telegram", "42", "again", key="file:1", file="/ws/plan.md"
            )
            is None
        )
        pending = await state.outbox.pending_outbound()
        assert [(m.text, m.file) for m in pending] == [
            ("an old reply", ""),
            ("the plan", "/ws/plan.md"),
        ]
