"""The usage tables: per person, day, kind of turn and model; and per group chat and day.

Rows are totals added to after every model call (`usage_daily`, `usage_groups_daily`), not
one per call: a year of a busy gateway stays a few thousand rows, and "today", "this week",
"this month" are one indexed sum each. What is counted and when, and what a failed write
means, is the ledger's business (gateway/stores/usage.py); this store only reads and adds.
Bookkeeping writes (NORMAL sync): a power loss may lose the last calls' counts.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from gateway.stores.database import StateDatabase

# (input, output, cache_read, cache_write, cost) of one call.
Tokens = tuple[int, int, int, int, float]

_UPSERT = (
    "INSERT INTO usage_daily (person, day, kind, model, calls, input, output, cache_read,"
    " cache_write, cost) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?)"
    " ON CONFLICT (person, day, kind, model) DO UPDATE SET calls = calls + 1,"
    " input = input + excluded.input, output = output + excluded.output,"
    " cache_read = cache_read + excluded.cache_read,"
    " cache_write = cache_write + excluded.cache_write, cost = cost + excluded.cost"
)
_GROUP_UPSERT = (
    "INSERT INTO usage_groups_daily (chat, day, calls, input, output, cache_read,"
    " cache_write, cost) VALUES (?, ?, 1, ?, ?, ?, ?, ?)"
    " ON CONFLICT (chat, day) DO UPDATE SET calls = calls + 1,"
    " input = input + excluded.input, output = output + excluded.output,"
    " cache_read = cache_read + excluded.cache_read,"
    " cache_write = cache_write + excluded.cache_write, cost = cost + excluded.cost"
)
_SUMS = (
    "count(*) AS rows_, sum(calls), sum(input), sum(output), sum(cache_read),"
    " sum(cache_write), sum(cost)"
)
# What `sums` may group by (a column name goes into the SQL: only these).
GROUPS = ("kind", "model", "day", "person")


class UsageStore:
    def __init__(self, db: StateDatabase) -> None:
        self.db = db

    @property
    def is_open(self) -> bool:
        return self.db.is_open

    async def add(self, person: str, day: date, kind: str, model: str, tokens: Tokens) -> None:
        """One call of `person`'s on `day`."""
        await self.db.write(_UPSERT, (person, day.isoformat(), kind, model, *tokens))

    async def add_group(self, chat: str, day: date, tokens: Tokens) -> None:
        """One call that served group chat `chat` on `day`."""
        await self.db.write(_GROUP_UPSERT, (chat, day.isoformat(), *tokens))

    async def group_day(self, chat: str, day: date) -> Any | None:
        """(calls, input, output, cache_read, cache_write, cost) of a group chat's day."""
        rows = await self.db.rows(
            "SELECT calls, input, output, cache_read, cache_write, cost"
            " FROM usage_groups_daily WHERE chat = ? AND day = ?",
            (chat, day.isoformat()),
        )
        return rows[0] if rows else None

    async def sums(
        self, group: str, person: str | None, since: date, until: date | None
    ) -> list[Any]:
        """Rows of (group value if `group`, row count, calls, input, output, cache_read,
        cache_write, cost) from `since` (inclusive) to `until` (exclusive)."""
        if group and group not in GROUPS:
            raise ValueError(f"cannot group usage by {group!r}")
        where, params = ["day >= ?"], [since.isoformat()]
        if until is not None:
            where.append("day < ?")
            params.append(until.isoformat())
        if person is not None:
            where.append("person = ?")
            params.append(person)
        head = f"{group}, " if group else ""
        sql = f"SELECT {head}{_SUMS} FROM usage_daily WHERE {' AND '.join(where)}"
        if group:
            sql += f" GROUP BY {group}"
        return list(await self.db.rows(sql, tuple(params)))
