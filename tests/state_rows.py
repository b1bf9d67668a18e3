"""What tests read from the state database that the gateway itself never asks for."""

from __future__ import annotations

from gateway.stores.state import StateDB


async def inbound_status(state: StateDB, channel: str, chat_id: str, message_id: str) -> str | None:
    """The inbox status of one message, None if it was never recorded (or was pruned)."""
    rows = await state.database.rows(
        "SELECT status FROM inbox WHERE channel = ? AND chat_id = ? AND message_id = ?",
        (channel, chat_id, message_id),
    )
    return str(rows[0][0]) if rows else None


async def inbound_counts(state: StateDB) -> dict[str, int]:
    """Inbound messages by status (pending, done, failed, ...)."""
    rows = await state.database.rows("SELECT status, count(*) FROM inbox GROUP BY status")
    return {str(status): int(count) for status, count in rows}


async def outbox_counts(state: StateDB) -> dict[str, int]:
    """Outbound messages by status (pending, sent, refused, failed)."""
    rows = await state.database.rows("SELECT status, count(*) FROM outbox GROUP BY status")
    return {str(status): int(count) for status, count in rows}
