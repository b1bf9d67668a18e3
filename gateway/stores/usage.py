"""The usage ledger: what each person's turns used and cost, per day, kind of turn and model.

One row per (person, day, kind, model) in the state database's `usage_daily` table, added to
after every model call with the provider's reported tokens and the cost from the price table
(gateway/stores/prices.py). Rows are totals, not one per call: a year of a busy gateway stays a
few thousand rows, and "today", "this week", "this month" are one indexed sum each. Days are
calendar days in the gateway's time zone, so a daily cap resets at the person's midnight.
A call that served a group chat is billed to its person (the owner) and also added to the
group's own day in `usage_groups_daily` (one row per group chat and day), which the group's
cap counts.

The tables and their SQL are gateway/stores/usage.py's. Written as bookkeeping (NORMAL sync):
a crash of the process loses nothing; a power loss may lose the last calls' counts, which is
acceptable for accounting, and never blocks a reply. A failed write is logged and the turn goes on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, tzinfo
from typing import Any

from gateway.agent.conversation import Usage
from gateway.clock import Clock
from gateway.stores.prices import PriceTable
from gateway.stores.usage_daily import GROUPS, UsageStore
from gateway.stores.usage_totals import Periods, RunningTotals, Totals, totals_of_row

__all__ = ["GROUPS", "Periods", "Totals", "UsageLedger"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Recording:
    """One call: what it counted (already in the running totals) and its row's write."""

    counted: Totals
    written: asyncio.Task[Totals]


class UsageLedger:
    """Records model calls and answers "how much since ..." per person, kind and model."""

    def __init__(self, store: UsageStore, prices: PriceTable, clock: Clock, zone: tzinfo) -> None:
        self.store = store
        self.prices = prices
        self.clock = clock
        self.zone = zone
        self._warned = False
        self._writes: set[asyncio.Task[Totals]] = set()
        # The pending writes by whom they count for (a person, "group:" + a group chat): a
        # budget check waits for its own, not for everyone's commit.
        self._pending: dict[str, set[asyncio.Task[Totals]]] = {}
        self._running = RunningTotals()  # what budget checks read (gateway/stores/usage_totals.py)

    def periods(self) -> Periods:
        return Periods(self.clock.now().astimezone(self.zone).date())

    def _ensure(self) -> bool:
        """The state database is open (else a warning, once: usage goes unrecorded)."""
        if not self.store.is_open:
            if not self._warned:
                self._warned = True
                log.warning("usage not recorded: the state database is not open")
            return False
        return True

    def record_soon(
        self, person: str, kind: str, model: str, usage: Usage, group: str = ""
    ) -> Totals:
        """`record` in the background: a turn's reply never waits for the bookkeeping write
        (another writer may hold the database for a while). Counted in the running totals at
        once, and reads wait for what is pending, so a total asked for after a call
        includes it."""
        return self._start(person, kind, model, usage, group).counted

    def _start(self, person: str, kind: str, model: str, usage: Usage, group: str) -> _Recording:
        """Count the call in the running totals (at once) and start writing its row (one
        pending write for each of whom it counts)."""
        counted = Totals.of(usage, self.prices.cost(model, usage))
        periods = self.periods()
        whom = [person, _group_key(group)] if group else [person]
        for who in whom:
            self._running.add(who, counted, periods)
        task = asyncio.create_task(
            self._write(person, kind, model, usage, group, counted), name="usage-record"
        )
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        for who in whom:
            self._pending.setdefault(who, set()).add(task)
            task.add_done_callback(functools.partial(self._forget, who))
        return _Recording(counted, task)

    async def settled(self) -> None:
        """Every call recorded so far is written (before closing)."""
        while self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    def _forget(self, who: str, task: asyncio.Task[Totals]) -> None:
        pending = self._pending.get(who)
        if pending is not None:
            pending.discard(task)
            if not pending:
                del self._pending[who]

    async def _written(self, who: str | None = None) -> None:
        """The calls recorded before this moment (for `who` only, if given) are written,
        before a read. Not a wait for an idle ledger: under load new writes keep coming,
        and a read (a budget check before a model call) needs only the ones before it."""
        pending = self._writes if who is None else self._pending.get(who, set())
        if pending:
            await asyncio.gather(*list(pending), return_exceptions=True)

    async def record(
        self, person: str, kind: str, model: str, usage: Usage, group: str = ""
    ) -> Totals:
        """Add one call (to `group`'s day too, when it served a group chat); returns what it
        counted (its cost from the price table)."""
        return await self._start(person, kind, model, usage, group).written

    async def _write(
        self, person: str, kind: str, model: str, usage: Usage, group: str, counted: Totals
    ) -> Totals:
        tokens = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            counted.cost,
        )
        try:
            if self._ensure():
                day = self.periods().today
                await self.store.add(person, day, kind, model, tokens)
                if group:
                    await self.store.add_group(group, day, tokens)
        except (sqlite3.Error, RuntimeError) as exc:  # the turn goes on; the log says why
            log.warning("usage of a %s call for %s not recorded: %s", kind, person or "-", exc)
        return counted

    async def spent(self, person: str, since: date) -> Totals:
        """`total(person, since)` for today or this month, from the running totals (read
        from the table only the first time): what a budget check reads before each call."""
        return await self._running_total(person, since, lambda: self.total(person, since))

    async def group_spent(self, chat: str, day: date) -> Totals:
        """`group_total(chat, day)` from the running totals, likewise."""
        return await self._running_total(_group_key(chat), day, lambda: self.group_total(chat, day))

    async def _running_total(
        self, who: str, since: date, read: Callable[[], Awaitable[Totals]]
    ) -> Totals:
        known = self._running.get(who, since)
        if known is not None:
            return known
        before = self._running.changes(who)
        totals = await read()
        self._running.keep(who, since, totals, before, self.periods())
        return totals

    async def total(self, person: str | None, since: date, until: date | None = None) -> Totals:
        """Everything from `since` (inclusive) to `until` (exclusive); all people if None."""
        rows = await self._select("", person, since, until)
        return totals_of_row(rows[0][1:]) if rows and rows[0][0] else Totals()

    async def group_total(self, chat: str, day: date) -> Totals:
        """What the calls serving group chat `chat` (its session key) used on `day`."""
        await self._written(_group_key(chat))
        if not self._ensure():
            return Totals()
        try:
            row = await self.store.group_day(chat, day)
        except sqlite3.Error as exc:
            log.warning("group usage could not be read: %s", exc)
            return Totals()
        return totals_of_row(row) if row is not None else Totals()

    async def grouped(
        self, group: str, person: str | None, since: date, until: date | None = None
    ) -> dict[str, Totals]:
        """Totals by `group` (kind, model, day or person), largest cost first."""
        if group not in GROUPS:
            raise ValueError(f"cannot group usage by {group!r}")
        rows = await self._select(group, person, since, until)
        found = {str(row[0]): totals_of_row(row[2:]) for row in rows}
        return dict(
            sorted(found.items(), key=lambda item: (-item[1].cost, -item[1].tokens, item[0]))
        )

    async def _select(
        self, group: str, person: str | None, since: date, until: date | None
    ) -> list[Any]:
        await self._written(person)
        if not self._ensure():
            return []
        try:
            return await self.store.sums(group, person, since, until)
        except sqlite3.Error as exc:
            log.warning("usage could not be read: %s", exc)
            return []


def _group_key(chat: str) -> str:
    """A group chat among the people in the running totals and the pending writes."""
    return f"group:{chat}"
